//! Explicit prefetch (report claim 6, off by default): one thread that
//! touches the weights the plan will read next with PREFETCHT0, one cache
//! line at a time, while the current operation computes. The report found
//! it slower when storage bandwidth binds; it is here so that the claim can
//! be measured again (`CFLOW_PREFETCH=1`, `deno task bench:prefetch`).
//!
//! A job is a byte range; posting a new one abandons the one in progress.
//! The thread starts on the first post and is joined by `shutdown`.

const std = @import("std");
const Atomic = std.atomic.Value;
const assert = std.debug.assert;

/// Largest range one job touches (a layer's biggest matrices are smaller).
pub const max_job_bytes: usize = 256 << 20;
const line: usize = 64;

var enabled: Atomic(bool) = .init(false);
var generation: Atomic(u32) = .init(0);
var job_ptr: Atomic(usize) = .init(0);
var job_len: Atomic(usize) = .init(0);
var stopping: Atomic(bool) = .init(false);
var thread: ?std.Thread = null;
var lock: std.Thread.Mutex = .{};
/// Lines touched since the last `reset` (for tests and the bench).
pub var lines_touched: Atomic(u64) = .init(0);

/// Turns prefetching on or off; off stops and joins the thread.
pub fn setEnabled(on: bool) void {
    if (!on) shutdown();
    enabled.store(on, .release);
}

pub fn isEnabled() bool {
    return enabled.load(.acquire);
}

/// Asks the thread to touch [ptr, ptr + len) (clamped to max_job_bytes);
/// returns at once. Nothing happens when prefetching is off.
pub fn post(ptr: [*]const u8, len: usize) void {
    if (!enabled.load(.acquire) or len == 0) return;
    if (thread == null) {
        lock.lock();
        defer lock.unlock();
        if (thread == null and !stopping.load(.acquire)) {
            // The thread starts from the generation before this post's.
            thread = std.Thread.spawn(.{}, run, .{generation.load(.acquire)}) catch return;
        }
    }
    job_ptr.store(@intFromPtr(ptr), .release);
    job_len.store(@min(len, max_job_bytes), .release);
    _ = generation.fetchAdd(1, .acq_rel);
    std.Thread.Futex.wake(&generation, 1);
}

fn run(start: u32) void {
    var seen: u32 = start;
    while (!stopping.load(.acquire)) {
        const now = generation.load(.acquire);
        if (now == seen) {
            std.Thread.Futex.timedWait(&generation, seen, 50 * std.time.ns_per_ms) catch {};
            continue;
        }
        seen = now;
        const base = job_ptr.load(.acquire);
        const len = job_len.load(.acquire);
        assert(len <= max_job_bytes);
        var off: usize = 0;
        var n: u64 = 0;
        while (off < len) : (off += line) {
            // A newer job replaces this one (checked every 4 KiB).
            if (off % 4096 == 0 and generation.load(.monotonic) != seen) break;
            @prefetch(@as([*]const u8, @ptrFromInt(base + off)), .{ .rw = .read, .locality = 3, .cache = .data });
            n += 1;
        }
        _ = lines_touched.fetchAdd(n, .monotonic);
    }
}

/// Stops and joins the thread (library shutdown or unload).
pub fn shutdown() void {
    lock.lock();
    defer lock.unlock();
    if (thread) |t| {
        stopping.store(true, .release);
        _ = generation.fetchAdd(1, .acq_rel);
        std.Thread.Futex.wake(&generation, 1);
        t.join();
        thread = null;
    }
    stopping.store(false, .release);
}

test "a posted range is touched, a disabled prefetcher does nothing" {
    var buf: [1 << 16]u8 = undefined;
    @memset(&buf, 1);
    lines_touched.store(0, .release);
    post(&buf, buf.len);
    try std.testing.expectEqual(@as(u64, 0), lines_touched.load(.acquire));
    setEnabled(true);
    post(&buf, buf.len);
    var waited: usize = 0;
    while (lines_touched.load(.acquire) < buf.len / line and waited < 2000) : (waited += 1) {
        std.time.sleep(std.time.ns_per_ms);
    }
    try std.testing.expectEqual(@as(u64, buf.len / line), lines_touched.load(.acquire));
    setEnabled(false);
    try std.testing.expect(thread == null);
}
