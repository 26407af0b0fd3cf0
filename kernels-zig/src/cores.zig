//! Counting the cores this process may run on (Linux, any architecture).

const std = @import("std");

/// Physical cores this process may run on: logical CPUs in the affinity
/// mask, with SMT siblings counted once (from sysfs topology); falls back to
/// the logical count when topology cannot be read.
pub fn physicalCores() u32 {
    const set = std.posix.sched_getaffinity(0) catch return logicalCores();
    var seen: [1024]u64 = undefined; // (package << 32 | core) per counted CPU
    var n_seen: usize = 0;
    var logical: u32 = 0;
    const bits_per = @bitSizeOf(usize);
    for (set, 0..) |word, wi| {
        if (word == 0) continue;
        for (0..bits_per) |b| {
            if ((word >> @intCast(b)) & 1 == 0) continue;
            const cpu_id = wi * bits_per + b;
            logical += 1;
            const core = readTopology(cpu_id, "core_id") orelse return logical_or(set);
            const pkg = readTopology(cpu_id, "physical_package_id") orelse return logical_or(set);
            const key = (@as(u64, pkg) << 32) | core;
            const dup = for (seen[0..n_seen]) |s| {
                if (s == key) break true;
            } else false;
            if (!dup) {
                if (n_seen == seen.len) return logical_or(set);
                seen[n_seen] = key;
                n_seen += 1;
            }
        }
    }
    if (n_seen == 0) return @max(1, logical);
    return @intCast(n_seen);
}

fn logical_or(set: std.posix.cpu_set_t) u32 {
    var n: u32 = 0;
    for (set) |word| n += @popCount(word);
    return @max(1, n);
}

fn logicalCores() u32 {
    const n = std.Thread.getCpuCount() catch 1;
    return @intCast(@max(1, @min(n, 1024)));
}

fn readTopology(cpu_id: usize, comptime field: []const u8) ?u32 {
    var path_buf: [96]u8 = undefined;
    const path = std.fmt.bufPrintZ(&path_buf, "/sys/devices/system/cpu/cpu{d}/topology/" ++ field, .{cpu_id}) catch return null;
    const file = std.fs.openFileAbsoluteZ(path, .{}) catch return null;
    defer file.close();
    var buf: [32]u8 = undefined;
    const n = file.readAll(&buf) catch return null;
    const text = std.mem.trim(u8, buf[0..n], " \n\t");
    return std.fmt.parseInt(u32, text, 10) catch null;
}
