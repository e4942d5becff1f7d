"""The composition root: how a node is put together from its configuration
(`build`), the `Append` API (`append_api`), and the supervisor that runs it and rebuilds
it after a full disk (`supervisor`). `kraft node` (tools/commands/node.py) is only the
command line around it; tests and tools build nodes the same way."""
