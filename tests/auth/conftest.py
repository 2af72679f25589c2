"""Puts this folder on sys.path, so its helpers import by bare name (`from authserver import AuthServer`)."""

from __future__ import annotations

import sys
from pathlib import Path

AUTH_TESTS = str(Path(__file__).resolve().parent)
if AUTH_TESTS not in sys.path:
    sys.path.append(AUTH_TESTS)  # appended, like tests/conftest.py does for tests/server: no conftest is shadowed
