"""Prints a greeting and writes it to a file."""
with open("hello.txt", "w", encoding="utf-8") as handle:
    handle.write("hello from python\n")
print("hello from python")
