# The cpu backend: always built. It runs kernels as functions of the process, on a pool of
# threads, and is what every other backend's results are compared with.
acg_add_backend(cpu SOURCES cpu.c graph.c pool.c queue.c collective.c LIBS Threads::Threads)
