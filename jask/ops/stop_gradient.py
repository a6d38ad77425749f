"""The same values with no derivative (lax.stop_gradient): a view of the same file, no copy."""

from .._jax.op import Op


class StopGradient(Op):
    name = "stop_gradient"
    kernel = "reshape"  # a same-shape reshape: a new handle on the same file
    zero_derivative = True

    def out_type(self, x):
        return x

    def kernel_params(self):
        return {"shape": self.in_avals[0].shape}
