package dev.skein.oracle;

/** A scenario the oracle cannot run (bad JSON, unknown topology, bad params): its message says why. */
final class OracleException extends RuntimeException {
  OracleException(String message) {
    super(message);
  }
}
