"""Talking to a source server: connections, flavour differences, startup checks."""
