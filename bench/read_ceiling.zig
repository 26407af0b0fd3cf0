//! The machine's read ceiling: how fast a plain load loop, and the usual
//! ways of helping one, read a large buffer at 1, 2, ... threads. The decode
//! benchmarks set weight bytes per second beside one streaming read (the
//! kernel library's `streamRead`: 32-byte loads, one 128-byte stride per
//! iteration); this checks that yardstick against 64-byte loads, several
//! streams per thread and software prefetches at several distances and cache
//! levels, so that "decode at N% of the read" and "the goal needs more than
//! the machine reads" rest on the best loop found, not on one.
//!
//! Run through `deno task bench:read-ceiling` (bench/read_ceiling.sh picks
//! the target's ISA level), or:
//!
//!     zig run -OReleaseFast -mcpu=x86_64_v3 bench/read_ceiling.zig -- \
//!         --threads 1,2 --mib 1024 --reps 3
//!
//! Each thread reads its own contiguous slice of one buffer (written once
//! first, so every page is resident), in 2 MiB pages where the kernel gives
//! them (`--small-pages`: the 4 KiB pages of a plain allocation). Every
//! loop folds every 8-byte word of its slice with XOR, so all loops must
//! return the same fold: the program checks it, which shows each one read
//! every byte.

const std = @import("std");

const W = @Vector(8, u64);
const line: usize = 64;
const stride: usize = 2 * line;

/// One 128-byte stride per iteration in 64-byte loads, two accumulators:
/// the yardstick's loop until 2026-12-05 (it streamed slower than `yardstick`
/// on Zen 4 with AVX-512 loads).
fn single(buf: []const u8) u64 {
    var a0: W = @splat(0);
    var a1: W = @splat(0);
    var i: usize = 0;
    while (i + stride <= buf.len) : (i += stride) {
        a0 ^= @as(W, @bitCast(buf[i..][0..line].*));
        a1 ^= @as(W, @bitCast(buf[i + line ..][0..line].*));
    }
    return @reduce(.Xor, a0 ^ a1);
}

/// The yardstick's loop, kernels.zig `streamRead`'s (a copy: this program
/// builds alone): 32-byte loads, four per stride, two accumulators. The
/// others load 64 bytes at a time on an AVX-512 build.
fn yardstick(buf: []const u8) u64 {
    const H = @Vector(4, u64);
    var a0: H = @splat(0);
    var a1: H = @splat(0);
    var i: usize = 0;
    while (i + stride <= buf.len) : (i += stride) {
        a0 ^= @as(H, @bitCast(buf[i..][0..32].*)) ^ @as(H, @bitCast(buf[i + 32 ..][0..32].*));
        a1 ^= @as(H, @bitCast(buf[i + 64 ..][0..32].*)) ^ @as(H, @bitCast(buf[i + 96 ..][0..32].*));
    }
    // The same fold as the 64-byte loops: lanes 0-3 and 4-7 of a 64-byte word.
    const a = a0 ^ a1;
    return a[0] ^ a[1] ^ a[2] ^ a[3];
}

/// S interleaved streams over S equal parts of the slice (more sequential
/// streams for the hardware prefetchers), then the tail.
fn streams(comptime S: usize, buf: []const u8) u64 {
    const part = buf.len / S / stride * stride;
    var acc: [S]W = @splat(@splat(0));
    var i: usize = 0;
    while (i < part) : (i += stride) {
        inline for (0..S) |s| {
            acc[s] ^= @as(W, @bitCast(buf[s * part + i ..][0..line].*));
            acc[s] ^= @as(W, @bitCast(buf[s * part + i + line ..][0..line].*));
        }
    }
    var r: W = @splat(0);
    inline for (0..S) |s| r ^= acc[s];
    return @reduce(.Xor, r) ^ single(buf[S * part ..]);
}

/// The single loop with a software prefetch `dist` bytes ahead, to the cache
/// level `locality` names (3: L1, 2: L2, 1: L3, 0: non-temporal).
fn prefetched(comptime locality: u2, comptime dist: usize, buf: []const u8) u64 {
    var a0: W = @splat(0);
    var a1: W = @splat(0);
    var i: usize = 0;
    while (i + stride <= buf.len) : (i += stride) {
        if (i + dist + stride <= buf.len) {
            @prefetch(buf.ptr + i + dist, .{ .locality = locality });
            @prefetch(buf.ptr + i + dist + line, .{ .locality = locality });
        }
        a0 ^= @as(W, @bitCast(buf[i..][0..line].*));
        a1 ^= @as(W, @bitCast(buf[i + line ..][0..line].*));
    }
    return @reduce(.Xor, a0 ^ a1);
}

const Loop = enum {
    yardstick,
    loads_64_byte,
    streams_2,
    streams_4,
    streams_8,
    prefetch_l1_1k,
    prefetch_l1_4k,
    prefetch_l2_4k,
    prefetch_l2_16k,
    prefetch_l3_8k,
    prefetch_nta_4k,

    fn read(self: Loop, buf: []const u8) u64 {
        return switch (self) {
            .yardstick => yardstick(buf),
            .loads_64_byte => single(buf),
            .streams_2 => streams(2, buf),
            .streams_4 => streams(4, buf),
            .streams_8 => streams(8, buf),
            .prefetch_l1_1k => prefetched(3, 1024, buf),
            .prefetch_l1_4k => prefetched(3, 4096, buf),
            .prefetch_l2_4k => prefetched(2, 4096, buf),
            .prefetch_l2_16k => prefetched(2, 16384, buf),
            .prefetch_l3_8k => prefetched(1, 8192, buf),
            .prefetch_nta_4k => prefetched(0, 4096, buf),
        };
    }
};

fn worker(loop: Loop, buf: []const u8, out: *u64) void {
    out.* = loop.read(buf);
}

const max_threads: usize = 64;

/// GB/s (10^9 bytes) of one pass of `loop` over buf split among `threads`;
/// `fold` gets the XOR of the threads' folds.
fn pass(loop: Loop, buf: []const u8, threads: usize, fold: *u64) !f64 {
    std.debug.assert(threads >= 1 and threads <= max_threads);
    const part = buf.len / threads / stride * stride;
    std.debug.assert(part * threads == buf.len);
    var folds: [max_threads]u64 = @splat(0);
    var handles: [max_threads]std.Thread = undefined;
    const t0 = std.time.nanoTimestamp();
    for (1..threads) |t| {
        handles[t] = try std.Thread.spawn(.{}, worker, .{ loop, buf[t * part ..][0..part], &folds[t] });
    }
    worker(loop, buf[0..part], &folds[0]);
    for (1..threads) |t| handles[t].join();
    const ns: f64 = @floatFromInt(std.time.nanoTimestamp() - t0);
    fold.* = 0;
    for (folds[0..threads]) |f| fold.* ^= f;
    return @as(f64, @floatFromInt(buf.len)) / ns;
}

fn usage() noreturn {
    std.debug.print("usage: read_ceiling [--threads 1,2] [--mib 1024] [--reps 3] [--small-pages]\n", .{});
    std.process.exit(2);
}

pub fn main() !void {
    var arena = std.heap.ArenaAllocator.init(std.heap.page_allocator);
    defer arena.deinit();
    const args = try std.process.argsAlloc(arena.allocator());
    var thread_list: []const u8 = "1,2";
    var mib: usize = 1024;
    var reps: usize = 3;
    var huge_pages = true;
    var i: usize = 1;
    while (i < args.len) : (i += 2) {
        if (std.mem.eql(u8, args[i], "--small-pages")) {
            huge_pages = false;
            i -= 1;
            continue;
        }
        if (i + 1 >= args.len) usage();
        const v = args[i + 1];
        if (std.mem.eql(u8, args[i], "--threads")) {
            thread_list = v;
        } else if (std.mem.eql(u8, args[i], "--mib")) {
            mib = std.fmt.parseInt(usize, v, 10) catch usage();
            if (mib < 64 or mib > 1 << 16) usage();
        } else if (std.mem.eql(u8, args[i], "--reps")) {
            reps = std.fmt.parseInt(usize, v, 10) catch usage();
            if (reps < 1 or reps > 100) usage();
        } else usage();
    }
    var threads: [16]usize = undefined;
    var n_threads: usize = 0;
    var it = std.mem.splitScalar(u8, thread_list, ',');
    while (it.next()) |s| {
        if (n_threads == threads.len) usage();
        const t = std.fmt.parseInt(usize, s, 10) catch usage();
        if (t < 1 or t > max_threads) usage();
        threads[n_threads] = t;
        n_threads += 1;
    }

    const bytes = mib << 20;
    const huge: usize = 2 << 20;
    const buf = try std.heap.page_allocator.alignedAlloc(u8, huge, bytes);
    defer std.heap.page_allocator.free(buf);
    // 2 MiB pages where the kernel gives them (THP "madvise" or "always"), as
    // cflow's weights get them (kernels-zig/src/memory.zig); with --small-pages
    // the 4 KiB pages a plain allocation has.
    if (huge_pages) std.posix.madvise(buf.ptr, buf.len, std.posix.MADV.HUGEPAGE) catch {};
    for (buf, 0..) |*b, k| b.* = @truncate(k *% 2654435761);

    const out = std.io.getStdOut().writer();
    try out.print("read ceiling: {d} MiB buffer ({s} pages), best of {d} rounds over the loops, GB/s = 10^9 bytes/s\n", .{ bytes >> 20, if (huge_pages) "2 MiB" else "4 KiB", reps });
    for (threads[0..n_threads]) |nt| {
        // The largest prefix that splits into equal slices of whole strides.
        const used = bytes / (nt * stride) * (nt * stride);
        const want = single(buf[0..used]);
        // Rounds over every loop, so that a slow or fast phase of a shared
        // host falls on all of them, not on one.
        const loops = comptime std.enums.values(Loop);
        var best: [loops.len]f64 = @splat(0);
        for (0..reps) |_| {
            for (loops, 0..) |loop, li| {
                var fold: u64 = undefined;
                best[li] = @max(best[li], try pass(loop, buf[0..used], nt, &fold));
                if (fold != want) {
                    std.debug.print("read_ceiling: {s} folded {x}, not {x}: it missed bytes\n", .{ @tagName(loop), fold, want });
                    std.process.exit(1);
                }
            }
        }
        var best_loop: Loop = .yardstick;
        var best_all: f64 = 0;
        for (loops, 0..) |loop, li| {
            try out.print("  {d} thread(s)  {s:<20} {d:>6.1}\n", .{ nt, @tagName(loop), best[li] });
            if (best[li] > best_all) {
                best_all = best[li];
                best_loop = loop;
            }
        }
        const yardstick_rate = best[@intFromEnum(Loop.yardstick)];
        try out.print("  {d} thread(s)  best {d:.1} GB/s ({s}); the yardstick's loop {d:.1} ({d:.1}% of it)\n", .{
            nt, best_all, @tagName(best_loop), yardstick_rate, 100 * yardstick_rate / best_all,
        });
    }
}
