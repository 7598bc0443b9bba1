"""The process's budgets and running conditions: container limits (cgroups), the CPU and memory
plan derived from them, the garbage collector after start-up, the event loop's lag, and waits
with a way out.
"""
