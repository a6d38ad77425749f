"""The functions users call, one module per family; jask/__init__.py re-exports them."""
