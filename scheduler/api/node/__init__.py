"""/api/node/v1/: the node API, for node agents holding their node's key (DESIGN §6; docs/runtime.md)."""
