#!/usr/bin/env bash
# PostgreSQL for the JDBC catalog's tests (tests/functional/catalogs.py starts a throwaway server):
# Debian's postgresql package, installed when no initdb is found.
set -euo pipefail
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  echo "installing PostgreSQL (Debian's postgresql package) for the JDBC catalog's tests"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
fi
