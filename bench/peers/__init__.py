"""Ports of the peers' own test cases (JAX, PyTorch, autograd, opt_einsum), run by bench/peer_suites.py."""
