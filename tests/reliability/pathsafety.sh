#!/bin/sh
# SPDX-License-Identifier: MIT
# Wrapper: see pathsafety.py for what is tested and what is printed. Needs root.
exec python3 "$(dirname "$0")/pathsafety.py" "$@"
