//! Q8_K activations: ggml's `quantize_row_q8_K_ref`, the rule llama.cpp's
//! x86 build applies to the activations of every K-quant matmul (Q4_K,
//! Q5_K, Q6_K weights; its `vec_dot_type` for them is Q8_K), written into
//! the plan's ActRow layout (packing.zig) so that every kernel reading
//! ActRows reads them unchanged.
//!
//! Per super-block of 256 values: `amax` = max |x|, `max` = the first value
//! whose |x| is amax (sign included), `iscale = -127 / max`, quants
//! `min(127, nearest_int(iscale * x))` with ggml's `nearest_int` (round to
//! nearest, ties to even, through the 1.5 * 2^23 trick), `d = 1 / iscale`;
//! a super-block of zeros has d = 0 and zero quants, and one whose largest
//! value is subnormal (iscale overflows) zero quants and d = -0 or 0.
//!
//! In the ActRow, each of the super-block's eight 32-value groups holds its
//! 32 quants, the f32 scale d (the same for the eight) and the sum of its
//! quants (ggml's `bsums` are per 16; a group's sum is two of them). The
//! block's two-byte scale field, which the kernels do not need (they read
//! the f32 scales), holds instead the sum of the group's first 16 quants as
//! an i16 (|sum| <= 16 * 127), ggml's first `bsums` of the pair: the Q6_K
//! panels' one-token kernel starts each 16-column piece at -32 times it.
//! Quants lie in [-127, 127] (|iscale x| <= 127 before rounding), which the
//! AVX2 kernels' saturation bounds need.

const std = @import("std");
const abi = @import("abi.zig");
const packing = @import("packing.zig");

const assert = std.debug.assert;
const ActRow = packing.ActRow;
const qk = abi.qk;

/// Values per super-block.
pub const qk_k: usize = 256;
const groups_per_sb = qk_k / qk;

comptime {
    assert(qk_k % qk == 0 and groups_per_sb == 8);
}

/// ggml's `nearest_int`: round to nearest, ties to even, for |v| <= 2^22.
inline fn nearestInt(v: f32) i32 {
    assert(@abs(v) <= 4194303.0);
    const b: u32 = @bitCast(v + 12582912.0);
    return @as(i32, @intCast(b & 0x007fffff)) - 0x00400000;
}

const V = @Vector(16, f32);
const VI = @Vector(16, i32);

/// `min(127, nearestInt(v))` for each lane of v, in the same operations.
inline fn nearestInts(v: V) VI {
    assert(@reduce(.And, @abs(v) <= @as(V, @splat(4194303.0))));
    const b: @Vector(16, u32) = @bitCast(v + @as(V, @splat(12582912.0)));
    const i: VI = @bitCast(b & @as(@Vector(16, u32), @splat(0x007fffff)));
    return @min(@as(VI, @splat(127)), i - @as(VI, @splat(0x00400000)));
}

/// Quantizes super-blocks [sb0, sb1) of the row `x` (a multiple of 256
/// long) into the ActRow at `q`; false, leaving them unspecified, when a
/// value is not finite. Each super-block depends on its 256 values only, so
/// a row split into ranges gives the bytes it gives whole.
pub fn quantizeSuperBlocks(x: []const f32, q: [*]u8, sb0: usize, sb1: usize) bool {
    assert(x.len % qk_k == 0);
    const n_sb = x.len / qk_k;
    assert(sb0 < sb1 and sb1 <= n_sb);
    const ng = x.len / qk;
    const so = ActRow.scalesOffset(ng);
    const su = ActRow.sumsOffset(ng);
    for (sb0..sb1) |sb| {
        const xs = x[sb * qk_k ..][0..qk_k];
        // amax, and the first value reaching it.
        var vmax: V = @splat(0);
        for (0..qk_k / 16) |i| {
            const v: V = xs[i * 16 ..][0..16].*;
            // NaN and infinities: v - v is not 0.
            if (@reduce(.Or, (v - v) != @as(V, @splat(0)))) return false;
            vmax = @max(vmax, @abs(v));
        }
        const amax = @reduce(.Max, vmax);
        var max: f32 = 0;
        for (xs) |v| {
            if (@abs(v) == amax) {
                max = v;
                break;
            }
        }
        const g0 = sb * groups_per_sb;
        if (amax == 0) {
            for (0..groups_per_sb) |j| {
                const blk = q + (g0 + j) * abi.q8_0_block_bytes;
                @memset(blk[0..abi.q8_0_block_bytes], 0);
                std.mem.writeInt(u32, (q + so + (g0 + j) * 4)[0..4], 0, .little);
                std.mem.writeInt(i32, (q + su + (g0 + j) * 4)[0..4], 0, .little);
            }
            continue;
        }
        const iscale: f32 = -127.0 / max;
        const d: f32 = 1.0 / iscale;
        // A subnormal largest value overflows iscale: ggml's quants then
        // come out 0 (nearest_int of an infinity or NaN, cut to 8 bits) and
        // d is 1 / inf = -0 or 0.
        const finite = std.math.isFinite(iscale);
        for (0..groups_per_sb) |j| {
            const g = g0 + j;
            const blk = q + g * abi.q8_0_block_bytes;
            // The group's two halves of 16, each a vector: the quants of
            // `quantGroupRef`, lane by lane.
            var halves: [2]VI = @splat(@splat(0));
            if (finite) {
                inline for (0..2) |h| halves[h] = nearestInts(@as(V, @splat(iscale)) * @as(V, xs[j * qk + h * 16 ..][0..16].*));
            }
            inline for (0..2) |h| {
                assert(@reduce(.Min, halves[h]) >= -127 and @reduce(.Max, halves[h]) <= 127);
                blk[2 + h * 16 ..][0..16].* = @bitCast(@as(@Vector(16, i8), @intCast(halves[h])));
            }
            const first: i32 = @reduce(.Add, halves[0]);
            const sum: i32 = first + @reduce(.Add, halves[1]);
            std.mem.writeInt(i16, blk[0..2], @intCast(first), .little);
            std.mem.writeInt(u32, (q + so + g * 4)[0..4], @bitCast(d), .little);
            std.mem.writeInt(i32, (q + su + g * 4)[0..4], sum, .little);
        }
    }
    return true;
}

/// The whole row: quantizeSuperBlocks over every super-block.
pub fn quantizeRow(x: []const f32, q: [*]u8) bool {
    return quantizeSuperBlocks(x, q, 0, x.len / qk_k);
}

// ---------------------------------------------------------------------------
// Tests (ggml's own bytes are checked in ffi/quantize_k_test.ts against
// tests/fixtures/ggml_q8_k/, made by libggml-base's quantize_row_q8_K_ref).
// ---------------------------------------------------------------------------

const testing = std.testing;

fn quantOf(q: []const u8, i: usize) i32 {
    return @as(i8, @bitCast(q[(i / qk) * abi.q8_0_block_bytes + 2 + i % qk]));
}

test "nearest_int rounds ties to even, as ggml's" {
    try testing.expectEqual(@as(i32, 2), nearestInt(2.5));
    try testing.expectEqual(@as(i32, 4), nearestInt(3.5));
    try testing.expectEqual(@as(i32, -2), nearestInt(-2.5));
    try testing.expectEqual(@as(i32, -127), nearestInt(-127.0));
    try testing.expectEqual(@as(i32, 1), nearestInt(0.75));
    try testing.expectEqual(@as(i32, 0), nearestInt(-0.25));
}

test "Q8_K: the first value of largest magnitude maps to -127, its sign kept" {
    const n = 2 * qk_k;
    var x: [n]f32 = undefined;
    var prng = std.Random.DefaultPrng.init(3);
    const rng = prng.random();
    for (&x) |*v| v.* = rng.float(f32) * 2 - 1;
    x[10] = 3;
    x[20] = -3; // same magnitude, later: not the one chosen
    x[qk_k + 5] = -0.0;
    for (x[qk_k..]) |*v| v.* = 0;
    var q: [ActRow.bytes(n / qk)]u8 = undefined;
    try testing.expect(quantizeRow(&x, &q));
    try testing.expectEqual(@as(i32, -127), quantOf(&q, 10));
    try testing.expectEqual(@as(i32, 127), quantOf(&q, 20));
    const so = ActRow.scalesOffset(n / qk);
    const su = ActRow.sumsOffset(n / qk);
    const d: f32 = @bitCast(std.mem.readInt(u32, q[so..][0..4], .little));
    try testing.expectEqual(1.0 / (-127.0 / @as(f32, 3)), d);
    for (0..8) |g| {
        const dg: f32 = @bitCast(std.mem.readInt(u32, q[so + g * 4 ..][0..4], .little));
        try testing.expectEqual(d, dg);
        var sum: i32 = 0;
        for (0..qk) |i| sum += quantOf(&q, g * qk + i);
        try testing.expectEqual(sum, std.mem.readInt(i32, q[su + g * 4 ..][0..4], .little));
        // The first half's sum in the block header (ggml's bsums[2g]).
        var first: i32 = 0;
        for (0..qk / 2) |i| first += quantOf(&q, g * qk + i);
        try testing.expectEqual(first, std.mem.readInt(i16, q[g * abi.q8_0_block_bytes ..][0..2], .little));
    }
    // A super-block of zeros: d 0, quants 0.
    for (qk_k..n) |i| try testing.expectEqual(@as(i32, 0), quantOf(&q, i));
    try testing.expectEqual(@as(u32, 0), std.mem.readInt(u32, q[so + 8 * 4 ..][0..4], .little));
    // Every value within half a step of its quant, quants in [-127, 127].
    for (0..qk_k) |i| {
        const v = quantOf(&q, i);
        try testing.expect(v >= -127 and v <= 127);
        try testing.expect(@abs(@as(f32, @floatFromInt(v)) * d - x[i]) <= @abs(d) * 0.5001);
    }
}

/// One group's quants as the scalar loop computed them before the groups
/// were vectorized: the reference the vector code is held to.
fn quantGroupRef(xs: []const f32, iscale: f32, finite: bool, out: *[qk]i32) void {
    for (0..qk) |i| out[i] = if (finite) @min(127, nearestInt(iscale * xs[i])) else 0;
}

test "Q8_K: the vector groups give the scalar loop's quants, ties and subnormal maxima included" {
    var prng = std.Random.DefaultPrng.init(5);
    const rng = prng.random();
    const n = 2 * qk_k;
    var x: [n]f32 = undefined;
    var q: [ActRow.bytes(n / qk)]u8 = undefined;
    for (0..300) |trial| {
        for (&x) |*v| v.* = (rng.float(f32) - 0.5) * 20;
        // Values at half steps of the scale: rounding ties.
        if (trial % 3 == 0) {
            for (&x) |*v| v.* = @as(f32, @floatFromInt(rng.intRangeAtMost(i32, -254, 254))) * 0.5 * (3.0 / 127.0);
            x[7] = 3;
        }
        // A super-block whose largest value is subnormal.
        if (trial % 7 == 0) for (x[qk_k..]) |*v| {
            v.* = std.math.floatTrueMin(f32) * @as(f32, @floatFromInt(rng.intRangeAtMost(i32, -3, 3)));
        };
        try testing.expect(quantizeRow(&x, &q));
        for (0..n / qk_k) |sb| {
            const xs = x[sb * qk_k ..][0..qk_k];
            var amax: f32 = 0;
            for (xs) |v| amax = @max(amax, @abs(v));
            if (amax == 0) continue;
            var max: f32 = 0;
            for (xs) |v| if (@abs(v) == amax) {
                max = v;
                break;
            };
            const iscale: f32 = -127.0 / max;
            for (0..groups_per_sb) |j| {
                var want: [qk]i32 = undefined;
                quantGroupRef(xs[j * qk ..][0..qk], iscale, std.math.isFinite(iscale), &want);
                for (0..qk) |i| try testing.expectEqual(want[i], quantOf(&q, sb * qk_k + j * qk + i));
            }
        }
    }
}

test "Q8_K: ranges of super-blocks give the whole row's bytes; non-finite values refuse" {
    const n = 4 * qk_k;
    var x: [n]f32 = undefined;
    var prng = std.Random.DefaultPrng.init(4);
    const rng = prng.random();
    for (&x) |*v| v.* = (rng.float(f32) - 0.5) * 40;
    var whole: [ActRow.bytes(n / qk)]u8 = @splat(0);
    var parts: [ActRow.bytes(n / qk)]u8 = @splat(0);
    try testing.expect(quantizeRow(&x, &whole));
    try testing.expect(quantizeSuperBlocks(&x, &parts, 0, 1));
    try testing.expect(quantizeSuperBlocks(&x, &parts, 1, 4));
    try testing.expectEqualSlices(u8, &whole, &parts);
    x[700] = std.math.nan(f32);
    try testing.expect(!quantizeRow(&x, &whole));
    x[700] = std.math.inf(f32);
    try testing.expect(!quantizeSuperBlocks(&x, &whole, 2, 3));
    try testing.expect(quantizeSuperBlocks(&x, &whole, 0, 2));
}
