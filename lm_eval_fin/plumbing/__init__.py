"""The machine and the process: atomic files, JSON lines, installed paths, the hub, CPUs and vLLM memory, flags, exit statuses and interrupts."""
