//! Sizes from Linux's /proc/self files ("Name:   123 kB" lines), which Deno
//! cannot read without full permissions, so the library reads them for it.
//! Reads are bounded (one fixed buffer) and every number is range-checked.

const std = @import("std");
const assert = std.debug.assert;

/// The most bytes read from one /proc file; smaps_rollup and status are
/// about 1-2 KiB.
pub const max_bytes = 16384;

/// Parses "Name: N kB" lines of `text`: for each of `names` (each ending in
/// ':') the value in bytes into `out`. False when a name is missing or its
/// value is not a number below 2^50 kB.
pub fn parseKb(text: []const u8, names: []const []const u8, out: []u64) bool {
    assert(names.len == out.len and names.len <= 8);
    var found = [_]bool{false} ** 8;
    var lines = std.mem.splitScalar(u8, text, '\n');
    while (lines.next()) |line| {
        for (names, 0..) |name, i| {
            if (found[i] or !std.mem.startsWith(u8, line, name)) continue;
            var fields = std.mem.tokenizeAny(u8, line[name.len..], " \t");
            const kb = std.fmt.parseInt(u64, fields.next() orelse return false, 10) catch return false;
            if (kb > (1 << 50)) return false;
            out[i] = kb * 1024;
            found[i] = true;
        }
    }
    for (found[0..names.len]) |f| if (!f) return false;
    return true;
}

/// Reads the /proc file at `path` (at most `max_bytes`) and parses it as
/// `parseKb` does. False when the file cannot be read or a field is missing.
pub fn readKb(path: []const u8, names: []const []const u8, out: []u64) bool {
    var buf: [max_bytes]u8 = undefined;
    const fd = std.posix.open(path, .{ .ACCMODE = .RDONLY }, 0) catch return false;
    defer std.posix.close(fd);
    var n: usize = 0;
    while (n < buf.len) {
        const got = std.posix.read(fd, buf[n..]) catch return false;
        if (got == 0) break;
        n += got;
    }
    return parseKb(buf[0..n], names, out);
}

test "parseKb: values in bytes, missing or malformed fields refused" {
    const text = "Name:\tdeno\nVmPeak:\t  100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n";
    var out: [2]u64 = undefined;
    try std.testing.expect(parseKb(text, &.{ "VmHWM:", "VmRSS:" }, &out));
    try std.testing.expectEqual([2]u64{ 2048 * 1024, 1024 * 1024 }, out);
    try std.testing.expect(!parseKb(text, &.{ "VmHWM:", "VmSwap:" }, &out));
    try std.testing.expect(!parseKb("VmHWM: x kB\n", &.{"VmHWM:"}, out[0..1]));
    try std.testing.expect(!parseKb("VmHWM: 99999999999999999 kB\n", &.{"VmHWM:"}, out[0..1]));
    try std.testing.expect(!parseKb("VmHWM:\n", &.{"VmHWM:"}, out[0..1]));
}

test "readKb: this process's status has a peak at least its current RSS" {
    if (@import("builtin").os.tag != .linux) return error.SkipZigTest;
    var out: [2]u64 = undefined;
    try std.testing.expect(readKb("/proc/self/status", &.{ "VmHWM:", "VmRSS:" }, &out));
    try std.testing.expect(out[0] >= out[1] and out[1] > 0);
    try std.testing.expect(!readKb("/proc/self/no-such-file", &.{"VmHWM:"}, out[0..1]));
}
