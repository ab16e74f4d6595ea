"""Prints a notarial term in working days."""
import sys

import notarial_dates

print(notarial_dates.plazo(int(sys.argv[1])))
