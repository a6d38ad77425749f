"""JAX integration: the hijax type, the op base class, and the one module that touches JAX
internals."""
