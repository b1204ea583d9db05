"""jaxrl_fast: deep-Q RL with the whole training loop compiled by JAX."""
