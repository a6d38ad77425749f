"""The JAX and optax patches: each named, written for one version, installed once by
jask._setup.install()."""

import dataclasses

import pytest

import jask  # noqa: F401 - installs the patches
from jask._jax import compat

EXPECTED = {
    "lowering_passes": "jax",
    "vmap_broadcast": "jax",
    "primitive_dispatch": "jax",
    "library_jits_run_inline": "jax",
    "scan_length_of_disk_arrays": "jax",
    "traced_array_check": "jax",
    "device_put": "jax",
    "device_get": "jax",
    "full_like_of_disk_arrays": "jax",
    "scalar_init_values_in_memory": "jax",
    "empty_disk_residuals": "jax",
    "where_keeps_disk_shapes": "jax",
    "searchsorted_of_disk_arrays": "jax",
    "disk_boolean_masks": "jax",
    "disk_mask_updates": "jax",
    "vjp_in_memory_cotangents": "jax",
    "accumulate_in_memory_cotangents": "jax",
    "custom_jvp_disk_tangents": "jax",
    "disk_array_structs": "jax",
    "loop_carry_kinds": "jax",
    "flax_msgpack_budget": "flax",
    "lineax_disk_structs": "lineax",
    "remat_outputs": "jax",
    "compiled_memory": "jax",
}


def test_the_patches_are_listed():
    assert {name: p.library for name, p in compat.PATCHES.items()} == EXPECTED


def test_each_patch_states_its_version_target_and_reason():
    for name, patch in compat.PATCHES.items():
        assert patch.name == name
        assert patch.version == compat.library_version(patch.library), name
        assert patch.target and patch.reason and "\n" not in patch.reason, name


def test_importing_jask_installs_every_patch():
    assert compat.installed_patches() == tuple(compat.PATCHES)


def test_installing_again_changes_nothing():
    jask._setup.install()
    assert compat.installed_patches() == tuple(compat.PATCHES)


def test_a_patch_for_another_version_is_refused():
    patch = dataclasses.replace(compat.PATCHES["lowering_passes"], version="0.0.1")
    with pytest.raises(ImportError, match=r"lowering_passes.*jax==0\.0\.1; found jax 0\.10\.2"):
        compat.check_version(patch)


def test_a_patch_for_a_missing_library_is_skipped():
    patch = dataclasses.replace(compat.PATCHES["device_put"], library="not_a_jask_dependency")
    assert compat.check_version(patch) is False
