#!/usr/bin/env bash
# Counts lines and words of every .txt file in the working directory, and writes a report.
set -euo pipefail
total=0
for file in *.txt; do
  words=$(wc -w < "$file")
  total=$((total + words))
  echo "$file: $words words"
done
echo "total: $total" | tee report.txt
