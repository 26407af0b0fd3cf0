/**
 * A tool a test needs that an install script finds or fetches (nginx,
 * Chromium): its path, or why there is none, so that the test is ignored
 * with the reason printed.
 *
 * @module
 */

const ROOT = new URL("../..", import.meta.url).pathname;

/**
 * Runs `scripts/<script>` (which prints the tool's path on success, why it
 * failed on stderr otherwise) and returns the path or the reason.
 *
 * @example
 * ```ts ignore
 * const nginx = installedTool("install-nginx.sh");
 * if (nginx.path === undefined) console.log(`ignored: ${nginx.why}`);
 * ```
 */
export function installedTool(script: string): { path?: string; why?: string } {
  try {
    const out = new Deno.Command("bash", { args: [`${ROOT}scripts/${script}`] }).outputSync();
    const text = new TextDecoder().decode(out.stdout).trim();
    if (out.code === 0 && text !== "") return { path: text };
    return { why: new TextDecoder().decode(out.stderr).trim().split("\n").at(-1) };
  } catch (error) {
    return { why: String(error) };
  }
}
