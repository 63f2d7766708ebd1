#!/usr/bin/env bash
# CI's precondition check, run by .ci/run before anything else: the tests start their own Kafka
# brokers (4.4.0, 3.9.2, secured ones) from Maven Central jars, so they need Node 20+ with npm,
# Java 17+ and Maven; the documentation site's browser test (test/unit/docs-site.test.ts) needs
# Chromium. A missing Java or Maven is installed with apt-get when this runs as root (or with
# password-less sudo) on a Debian/Ubuntu machine, and so is a missing Chromium (Debian's
# chromium, without recommended packages); otherwise, or with SKEIN_CI_INSTALL=0, it stops at
# once with one message naming what to install.
set -uo pipefail

packages="openjdk-17-jdk-headless maven"

java_major() {
  local java="java"
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then java="$JAVA_HOME/bin/java"; fi
  command -v "$java" >/dev/null 2>&1 || return 1
  "$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -1
}

missing_tools() {
  local major
  major=$(java_major) || major=""
  if [ -z "$major" ]; then echo "Java 17+ (no java on PATH nor in JAVA_HOME)"
  elif [ "$major" -lt 17 ]; then echo "Java 17+ (java is version $major)"
  fi
  command -v mvn >/dev/null 2>&1 || echo "Maven (no mvn on PATH)"
}

fail() {
  echo "ci-preflight: $1" >&2
  exit 1
}

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null) || node_major=""
if [ -z "$node_major" ] || [ "$node_major" -lt 20 ] || ! command -v npm >/dev/null 2>&1; then
  fail "CI needs Node 20+ with npm (found: ${node_major:-no node}${node_major:+ }$(command -v npm >/dev/null 2>&1 || echo ', no npm')); install it from https://nodejs.org or your package manager, then run .ci/run again."
fi

missing=$(missing_tools)
if [ -n "$missing" ]; then
  what=$(echo "$missing" | paste -sd ';' | sed 's/;/ and /g')
  hint="install them (as root: apt-get install -y $packages), or put them on PATH (Java also through JAVA_HOME)"
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; fi
  if [ "${SKEIN_CI_INSTALL:-1}" = 0 ]; then
    fail "CI needs $what to start its Kafka brokers; $hint (SKEIN_CI_INSTALL=0: not installing)."
  fi
  if ! command -v apt-get >/dev/null 2>&1 || { [ "$(id -u)" != 0 ] && [ -z "$sudo" ]; }; then
    fail "CI needs $what to start its Kafka brokers; $hint."
  fi
  echo "ci-preflight: missing $what: installing $packages with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  # --no-upgrade: an installed package is left as it is (never upgraded under running brokers).
  apt_updated=1
  $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-upgrade $packages >/dev/null ||
    fail "apt-get could not install $packages; CI needs $what to start its Kafka brokers; $hint."
  hash -r
  missing=$(missing_tools)
  if [ -n "$missing" ]; then
    what=$(echo "$missing" | paste -sd ';' | sed 's/;/ and /g')
    fail "CI still lacks $what after apt-get installed $packages (installed but not on PATH? java and mvn are in /usr/bin); $hint."
  fi
fi

# Chromium for the browser test: CHROMIUM_PATH, else the paths test/helpers/chromium.ts looks at.
find_chromium() {
  if [ -n "${CHROMIUM_PATH:-}" ]; then [ -x "$CHROMIUM_PATH" ] && echo "$CHROMIUM_PATH"; return; fi
  local path
  for path in /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome-stable /usr/bin/google-chrome; do
    if [ -x "$path" ]; then echo "$path"; return; fi
  done
}
chromium=$(find_chromium)
if [ -z "$chromium" ]; then
  hint="install it (as root: apt-get install -y --no-install-recommends chromium) or set CHROMIUM_PATH"
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; fi
  if [ "${SKEIN_CI_INSTALL:-1}" = 0 ]; then
    fail "CI needs Chromium for the documentation site's browser test; $hint (SKEIN_CI_INSTALL=0: not installing)."
  fi
  if [ -n "${CHROMIUM_PATH:-}" ] || ! command -v apt-get >/dev/null 2>&1 || { [ "$(id -u)" != 0 ] && [ -z "$sudo" ]; }; then
    fail "CI needs Chromium for the documentation site's browser test (${CHROMIUM_PATH:+CHROMIUM_PATH=$CHROMIUM_PATH is not an executable; }none found); $hint."
  fi
  echo "ci-preflight: no Chromium: installing chromium with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  started=$SECONDS
  { [ -n "${apt_updated:-}" ] || $sudo apt-get update -qq; } &&
    $sudo apt-get install -y -qq --no-upgrade --no-install-recommends chromium >/dev/null ||
    fail "apt-get could not install chromium; CI needs Chromium for the documentation site's browser test; $hint."
  chromium=$(find_chromium)
  [ -n "$chromium" ] || fail "CI still lacks Chromium after apt-get installed chromium (not in /usr/bin?); $hint."
  echo "ci-preflight: Chromium installed in $((SECONDS - started)) s" >&2
fi
echo "ci-preflight: Node $(node -v), Java $(java_major), $(mvn -B -v 2>/dev/null | head -1 | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/ (.*//'), $("$chromium" --version 2>/dev/null | head -1)" >&2
