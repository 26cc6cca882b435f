#!/usr/bin/env bash
# Installs what the tests need and runs every test: the C++ core's GoogleTest suite (CTest),
# a C++ program built against the installed srift::core (find_package), and pytest.
# This is the README's second Quickstart command; .ci/run runs it verbatim.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ ! -f /usr/include/gtest/gtest.h ] && [ ! -f /usr/local/include/gtest/gtest.h ]; then
  echo "== installing GoogleTest (apt: libgtest-dev)"
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq libgtest-dev >/dev/null
fi

echo "== installing Python requirements (pinned) and srift"
python3 -m pip install -q -r requirements-test.txt
python3 -m pip install -q --no-build-isolation .

echo "== C++: building and running the core's tests"
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build/tests -DSRIFT_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$PWD/build/prefix" >/dev/null
cmake --build build/tests -j "$jobs"
ctest --test-dir build/tests --output-on-failure -j "$jobs"

echo "== C++: an embedder's program against the installed srift::core"
cmake --install build/tests --component core >/dev/null
cmake -S examples/cpp -B build/example -DCMAKE_PREFIX_PATH="$PWD/build/prefix" >/dev/null
cmake --build build/example -j "$jobs"
./build/example/plan_cluster srift/data/models

echo "== Python: pytest"
# Run from tests/ so the installed package, not the source folder, is imported.
cd tests/python && python3 -m pytest -q -p no:cacheprovider --benchmark-disable .
