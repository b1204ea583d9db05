"""What the library needs from the machine (layer 0): writable directories and atomic files
(`paths`), the CPU lowering of JAX's random bits (`cpu_lowering`), and what a training call
reports of its time (`timing`)."""
