/**
 * The exit statuses of `cflow`, in one place (documented in `cflow help`
 * and the README).
 *
 * @module
 */

/** Exit statuses of `cflow`. */
export const EXIT = {
  /** Success. */
  OK: 0,
  /**
   * An error while running: a missing or malformed file, a model that does
   * not load, a failed download or checksum, a kernel library that cannot
   * run on this CPU.
   */
  ERROR: 1,
  /**
   * A usage mistake: an unknown command or option, an option that does not
   * apply to the command, a bad value, a bad pull reference, a command not
   * implemented yet.
   */
  USAGE: 2,
  /** Interrupted by Ctrl-C (SIGINT): 128 + 2, as shells report it. */
  INTERRUPTED: 130,
  /**
   * Standard output was closed by its reader (`| head`): 128 + 13, what a
   * shell reports for a Unix tool that SIGPIPE ended; nothing is printed.
   */
  CLOSED_PIPE: 141,
} as const;

/** The exit statuses with one line each, for help and the README. */
export const EXIT_CODES_HELP: readonly (readonly [number, string])[] = [
  [EXIT.OK, "success"],
  [EXIT.ERROR, "error: a file, model, download, checksum or kernel library problem"],
  [EXIT.USAGE, "usage: unknown command or option, bad value, bad pull reference"],
  [EXIT.INTERRUPTED, "interrupted by Ctrl-C (generate prints what it has first)"],
  [EXIT.CLOSED_PIPE, "stdout closed by its reader (| head), quietly, as SIGPIPE ends a Unix tool"],
];
