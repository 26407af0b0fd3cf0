//! The machine's multiply-accumulate ceiling per dot-product primitive: how
//! many int8 products a second each variant's panel step can issue at 1, 2,
//! ... threads, with its operands in L1 and eight independent accumulators
//! (more than any primitive's latency needs), so that nothing but the
//! instructions themselves limits it. Prefill is bound by these
//! instructions, not by memory (docs/KERNELS.md), the way decode is bound by
//! the read that `bench:read-ceiling` measures: "prefill needs more than the
//! primitive issues" rests on this.
//!
//! Each sequence is what one 4-column chunk of a panel costs one token in
//! kernels-zig/src/panels.zig (`PanelDot.step`), weights already prepared
//! (the kernels prepare a chunk once for every token of a block):
//!
//! - `vnni512`: `vpdpbusd` on zmm, 16 rows x 4 columns = 64 products.
//! - `vnni256`: `vpdpbusd` on ymm (AVX-VNNI's instruction; here its EVEX
//!   form), 8 rows x 4 = 32.
//! - `avx2_q8_0`: `vpsignb` of the broadcast activations by the weights,
//!   `vpmaddubsw` with |w|, `vpmaddwd` by ones, `vpaddd`: 32 products.
//! - `avx2_q4_0`: `vpmaddubsw` of nibbles, summed in i16 (`vpaddw`), widened
//!   by one `vpmaddwd` every 8 steps: 32 products a `vpmaddubsw`.
//! - `fma256` / `fma512`: f32 `vfmadd231ps`, 8 / 16 products (attention's
//!   scores and outputs are these).
//!
//! Every step also takes its 4 activation bytes with a broadcast load, as
//! the kernels do. Run through `deno task bench:mac-ceiling`
//! (bench/mac_ceiling.sh picks the target's ISA level), or:
//!
//!     zig run -OReleaseFast -mcpu=x86_64_v4+avx512vnni bench/mac_ceiling.zig -- \
//!         --threads 1,2 --reps 3

const std = @import("std");
const builtin = @import("builtin");

const has_avx2 = builtin.cpu.arch == .x86_64 and std.Target.x86.featureSetHas(builtin.cpu.features, .avx2);
const has_avx512 = builtin.cpu.arch == .x86_64 and std.Target.x86.featureSetHas(builtin.cpu.features, .avx512bw);
const has_vnni = has_avx512 and std.Target.x86.featureSetHas(builtin.cpu.features, .avx512vnni) and
    std.Target.x86.featureSetHas(builtin.cpu.features, .avx512vl);

extern fn @"llvm.x86.avx512.vpdpbusd.512"(@Vector(16, i32), @Vector(16, i32), @Vector(16, i32)) @Vector(16, i32);
extern fn @"llvm.x86.avx512.vpdpbusd.256"(@Vector(8, i32), @Vector(8, i32), @Vector(8, i32)) @Vector(8, i32);
extern fn @"llvm.x86.avx2.pmadd.ub.sw"(@Vector(32, u8), @Vector(32, i8)) @Vector(16, i16);
extern fn @"llvm.x86.avx2.pmadd.wd"(@Vector(16, i16), @Vector(16, i16)) @Vector(8, i32);
extern fn @"llvm.x86.avx2.psign.b"(@Vector(32, i8), @Vector(32, i8)) @Vector(32, i8);

const Seq = enum { vnni512, vnni256, avx2_q8_0, avx2_q4_0, fma256, fma512 };

/// Whether this build (its -mcpu) can run the sequence.
fn available(s: Seq) bool {
    return switch (s) {
        .vnni512, .vnni256 => has_vnni,
        .avx2_q8_0, .avx2_q4_0, .fma256 => has_avx2,
        .fma512 => has_avx512,
    };
}

/// The variant family a sequence belongs to: `--isa` picks one, so that
/// each runs in a build of its own level (the `avx2` variant is compiled for
/// x86-64-v3, with 16 vector registers; an x86-64-v4 build gives the same
/// code 32 and EVEX forms).
const Isa = enum { avx2, avx512 };

fn isaOf(s: Seq) Isa {
    return switch (s) {
        .avx2_q8_0, .avx2_q4_0, .fma256 => .avx2,
        .vnni512, .vnni256, .fma512 => .avx512,
    };
}

/// Products one step of the sequence computes.
fn productsPerStep(s: Seq) u64 {
    return switch (s) {
        .vnni512 => 64,
        .vnni256, .avx2_q8_0, .avx2_q4_0 => 32,
        .fma256 => 8,
        .fma512 => 16,
    };
}

/// Accumulators (independent chains) and steps per chain per iteration.
const chains: usize = 8;
const steps: usize = 8;

/// Operands: 8 x 64 bytes of weights (per chain), 256 bytes of activations.
const Operands = struct {
    w: [chains][64]u8 align(64),
    x: [256]u8 align(64),
    /// The f32 sequences' activations.
    xf: [64]f32 align(64),
};

/// Four activation bytes at x[o..], broadcast to every 4-byte lane.
inline fn bcast(comptime N: usize, x: *const [256]u8, o: usize) @Vector(N, i32) {
    return @splat(std.mem.readInt(i32, x[o..][0..4], .little));
}

/// `iters` iterations of `chains` x `steps` steps of sequence s; returns a
/// fold of the accumulators (so that no work is dropped).
fn run(comptime s: Seq, ops: *const Operands, iters: usize) u64 {
    if (!available(s)) unreachable;
    var fold: u64 = 0;
    switch (s) {
        .vnni512, .vnni256 => {
            const N = if (s == .vnni512) 16 else 8;
            const V = @Vector(N, i32);
            var acc: [chains]V = @splat(@splat(0));
            for (0..iters) |it| {
                inline for (0..steps) |st| {
                    const xo = ((it + st) & 31) * 4;
                    const xv = bcast(N, &ops.x, xo);
                    inline for (0..chains) |c| {
                        const wv: V = @bitCast(ops.w[c][0 .. N * 4].*);
                        acc[c] = if (N == 16)
                            @"llvm.x86.avx512.vpdpbusd.512"(acc[c], wv, xv)
                        else
                            @"llvm.x86.avx512.vpdpbusd.256"(acc[c], wv, xv);
                    }
                }
            }
            inline for (0..chains) |c| fold +%= @as(u64, @bitCast(@as(i64, @reduce(.Add, acc[c]))));
        },
        .avx2_q8_0 => {
            const V = @Vector(8, i32);
            var acc: [chains]V = @splat(@splat(0));
            for (0..iters) |it| {
                inline for (0..steps) |st| {
                    const xo = ((it + st) & 31) * 4;
                    const xv: @Vector(32, i8) = @bitCast(bcast(8, &ops.x, xo));
                    inline for (0..chains) |c| {
                        // The prepared chunk: |w| in the first 32 bytes, w in the next.
                        const wa: @Vector(32, u8) = ops.w[c][0..32].*;
                        const ws: @Vector(32, i8) = @bitCast(ops.w[c][32..64].*);
                        const xs = @"llvm.x86.avx2.psign.b"(xv, ws);
                        acc[c] +%= @"llvm.x86.avx2.pmadd.wd"(@"llvm.x86.avx2.pmadd.ub.sw"(wa, xs), @splat(1));
                    }
                }
            }
            inline for (0..chains) |c| fold +%= @as(u64, @bitCast(@as(i64, @reduce(.Add, acc[c]))));
        },
        .avx2_q4_0 => {
            const V = @Vector(8, i32);
            var acc: [chains]V = @splat(@splat(0));
            for (0..iters) |it| {
                var part: [chains]@Vector(16, i16) = @splat(@splat(0));
                inline for (0..steps) |st| {
                    const xo = ((it + st) & 31) * 4;
                    const xv: @Vector(32, i8) = @bitCast(bcast(8, &ops.x, xo));
                    inline for (0..chains) |c| {
                        // Nibbles (<= 15): 8 steps stay within i16.
                        const wn: @Vector(32, u8) = ops.w[c][(st % 2) * 32 ..][0..32].*;
                        part[c] +%= @"llvm.x86.avx2.pmadd.ub.sw"(wn, xv);
                    }
                }
                inline for (0..chains) |c| acc[c] +%= @"llvm.x86.avx2.pmadd.wd"(part[c], @splat(1));
            }
            inline for (0..chains) |c| fold +%= @as(u64, @bitCast(@as(i64, @reduce(.Add, acc[c]))));
        },
        .fma256, .fma512 => {
            const N = if (s == .fma512) 16 else 8;
            const V = @Vector(N, f32);
            var acc: [chains]V = @splat(@splat(0));
            for (0..iters) |it| {
                inline for (0..steps) |st| {
                    const xo = ((it + st) & 31) * 4;
                    const xv: V = @splat(ops.xf[xo / 4]);
                    inline for (0..chains) |c| {
                        const wv: V = @bitCast(ops.w[c][0 .. N * 4].*);
                        acc[c] = @mulAdd(V, xv, wv, acc[c]);
                    }
                }
            }
            inline for (0..chains) |c| fold +%= @as(u32, @bitCast(@reduce(.Add, acc[c])));
        },
    }
    return fold;
}

fn worker(s: Seq, iters: usize, out: *u64) void {
    var ops: Operands = undefined;
    for (&ops.w, 0..) |*row, c| {
        for (row, 0..) |*b, k| b.* = @truncate((c * 64 + k) *% 2654435761 >> 7);
    }
    // Nibble sequences take the low 4 bits; the sign trick needs |w| in the
    // first half, the activations within [-127, 127].
    if (s == .avx2_q4_0) {
        for (&ops.w) |*row| {
            for (row) |*b| b.* &= 0x0f;
        }
    }
    if (s == .avx2_q8_0) {
        for (&ops.w) |*row| {
            for (row[0..32], row[32..64]) |*a, sb| a.* = @abs(@as(i8, @bitCast(sb)));
        }
    }
    for (&ops.x, 0..) |*b, k| {
        const v: i8 = @truncate(@as(isize, @intCast(k *% 40503 % 255)) - 127);
        b.* = @bitCast(v);
    }
    for (&ops.xf, ops.x[0..64]) |*f, b| f.* = @as(f32, @floatFromInt(@as(i8, @bitCast(b)))) * (1.0 / 256.0);
    out.* = switch (s) {
        inline else => |cs| if (comptime available(cs)) run(cs, &ops, iters) else 0,
    };
}

const max_threads: usize = 64;

/// Products a second (10^9) of `threads` threads each running `iters`
/// iterations of s.
fn pass(s: Seq, iters: usize, threads: usize, fold: *u64) !f64 {
    std.debug.assert(threads >= 1 and threads <= max_threads);
    var folds: [max_threads]u64 = @splat(0);
    var handles: [max_threads]std.Thread = undefined;
    const t0 = std.time.nanoTimestamp();
    for (1..threads) |t| handles[t] = try std.Thread.spawn(.{}, worker, .{ s, iters, &folds[t] });
    worker(s, iters, &folds[0]);
    for (1..threads) |t| handles[t].join();
    const ns: f64 = @floatFromInt(std.time.nanoTimestamp() - t0);
    fold.* = 0;
    for (folds[0..threads]) |f| fold.* ^= f;
    const products = @as(f64, @floatFromInt(iters * chains * steps * productsPerStep(s) * threads));
    return products / ns;
}

fn usage() noreturn {
    std.debug.print("usage: mac_ceiling [--threads 1,2] [--reps 3] [--iters N] [--isa avx2|avx512]\n", .{});
    std.process.exit(2);
}

pub fn main() !void {
    var arena = std.heap.ArenaAllocator.init(std.heap.page_allocator);
    defer arena.deinit();
    const args = try std.process.argsAlloc(arena.allocator());
    var thread_list: []const u8 = "1,2";
    var reps: usize = 3;
    var iters: usize = 4_000_000;
    var isa: ?Isa = null;
    var i: usize = 1;
    while (i < args.len) : (i += 2) {
        if (i + 1 >= args.len) usage();
        const v = args[i + 1];
        if (std.mem.eql(u8, args[i], "--threads")) {
            thread_list = v;
        } else if (std.mem.eql(u8, args[i], "--reps")) {
            reps = std.fmt.parseInt(usize, v, 10) catch usage();
            if (reps < 1 or reps > 100) usage();
        } else if (std.mem.eql(u8, args[i], "--isa")) {
            isa = std.meta.stringToEnum(Isa, v) orelse usage();
        } else if (std.mem.eql(u8, args[i], "--iters")) {
            iters = std.fmt.parseInt(usize, v, 10) catch usage();
            if (iters < 1000 or iters > 1 << 32) usage();
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

    const out = std.io.getStdOut().writer();
    try out.print("MAC ceiling: {d} chains x {d} steps x {d} iterations per thread, operands in L1, best of {d} rounds, G products/s (10^9)\n", .{ chains, steps, iters, reps });
    const seqs = comptime std.enums.values(Seq);
    for (threads[0..n_threads]) |nt| {
        var best: [seqs.len]f64 = @splat(0);
        // Rounds over every sequence, so that a slow or fast phase of a
        // shared host falls on all of them.
        for (0..reps) |_| {
            for (seqs, 0..) |s, si| {
                if (!available(s) or (isa != null and isa.? != isaOf(s))) continue;
                var fold: u64 = undefined;
                best[si] = @max(best[si], try pass(s, iters, nt, &fold));
                // The fold is printed nowhere; this keeps it (and the work) live.
                std.mem.doNotOptimizeAway(fold);
            }
        }
        for (seqs, 0..) |s, si| {
            if (isa != null and isa.? != isaOf(s)) continue;
            if (!available(s)) {
                try out.print("  {d} thread(s)  {s:<10} not in this build (the CPU lacks it)\n", .{ nt, @tagName(s) });
                continue;
            }
            try out.print("  {d} thread(s)  {s:<10} {d:>7.1}  ({d:.1} per thread)\n", .{ nt, @tagName(s), best[si], best[si] / @as(f64, @floatFromInt(nt)) });
        }
    }
}
