"""The engine: key names, Lua scripts and their loader, the sans-IO operations, the task
hash, codecs and argument checks. No I/O happens here; the clients send what it builds."""
