//! The element operations every attention path (attention.zig) shares,
//! which fix each result's bits: reading KV cache values (`kvLoad`,
//! `kvOne`: f32, f16 or Q8_0), the query values the K.q product takes
//! (`qLoad`, `qOne`: rounded to f16 over an f16 cache), the exp of the
//! softmax (`expNonPositive`), and the tree-ordered lane sums of the scores
//! (`treeSum`, `treeSums`). attention.zig re-exports what is public here.

const std = @import("std");
const builtin = @import("builtin");
const abi = @import("abi.zig");

const assert = std.debug.assert;
const qk = abi.qk;
const BlockQ8_0 = abi.BlockQ8_0;

/// Values [e, e + N) of a KV cache whose elements are T: f32, f16, or
/// `BlockQ8_0` (llama.cpp's `-ctk q8_0 -ctv q8_0`), where element e is
/// value e % 32 of block e / 32, dequantized (quant times the block's
/// scale). For Q8_0, N divides 32 and e is a multiple of N, so the values lie
/// in one block: every head row is a whole number of blocks (head_dim % 32 ==
/// 0, checked where the cache is made) and the kernels step head_dim by N.
pub inline fn kvLoad(comptime T: type, comptime N: usize, p: [*]const T, e: usize) @Vector(N, f32) {
    if (T == BlockQ8_0) {
        comptime assert(qk % N == 0);
        assert(e % N == 0);
        const b = &p[e / qk];
        const qs: @Vector(N, i8) = b.qs[e % qk ..][0..N].*;
        return @as(@Vector(N, f32), @floatFromInt(qs)) * @as(@Vector(N, f32), @splat(abi.f16ToF32(b.d)));
    }
    const v: @Vector(N, T) = p[e..][0..N].*;
    return if (T == f32) v else @floatCast(v);
}

/// Value e of a KV cache of T elements (see `kvLoad`).
pub inline fn kvOne(comptime T: type, p: [*]const T, e: usize) f32 {
    if (T == BlockQ8_0) {
        const b = &p[e / qk];
        return @as(f32, @floatFromInt(b.qs[e % qk])) * abi.f16ToF32(b.d);
    }
    return @floatCast(p[e]);
}

/// x (f32 or a vector of f32) rounded to f16 (nearest even) and back.
/// Vectors convert in one instruction with F16C; wasm32's LLVM backend
/// rejects the vector cast, so there each lane converts on its own.
inline fn roundF16(x: anytype) @TypeOf(x) {
    const T = @TypeOf(x);
    if (T == f32) return @floatCast(@as(f16, @floatCast(x)));
    const N = @typeInfo(T).vector.len;
    if (comptime builtin.cpu.arch.isWasm()) {
        var r: [N]f32 = undefined;
        inline for (0..N) |i| r[i] = @floatCast(@as(f16, @floatCast(x[i])));
        return r;
    }
    return @floatCast(@as(@Vector(N, f16), @floatCast(x)));
}

/// N query values from q[d..] as the K.q product takes them. Over an f16
/// cache they are rounded to f16 first, as llama.cpp does (its KQ product
/// converts q to the cache's type), so that the product is f16 x f16
/// summed in f32; over f32 and Q8_0 caches q stays f32.
pub inline fn qLoad(comptime T: type, comptime N: usize, q: []const f32, d: usize) @Vector(N, f32) {
    const v: @Vector(N, f32) = q[d..][0..N].*;
    return if (T == f16) roundF16(v) else v;
}

/// One query value as `qLoad` gives it.
pub inline fn qOne(comptime T: type, x: f32) f32 {
    return if (T == f16) roundF16(x) else x;
}

/// exp(x) for x <= 0 (softmax after the max is subtracted), vectorized:
/// x = n ln2 + r with |r| <= ln2 / 2, a degree-7 Taylor polynomial for e^r, and
/// 2^n built in the exponent bits; within 2 ulp of expf, 0 below -87.
pub inline fn expNonPositive(comptime N: usize, x_in: @Vector(N, f32)) @Vector(N, f32) {
    const V = @Vector(N, f32);
    const x = @max(x_in, @as(V, @splat(-87.0)));
    const n = @round(x * @as(V, @splat(1.4426950408889634)));
    // r = x - n ln2, with ln2 split in two for accuracy.
    var r = @mulAdd(V, n, @as(V, @splat(-0.693145751953125)), x);
    r = @mulAdd(V, n, @as(V, @splat(-1.428606765330187e-06)), r);
    var p: V = @splat(1.0 / 5040.0);
    p = @mulAdd(V, p, r, @splat(1.0 / 720.0));
    p = @mulAdd(V, p, r, @splat(1.0 / 120.0));
    p = @mulAdd(V, p, r, @splat(1.0 / 24.0));
    p = @mulAdd(V, p, r, @splat(1.0 / 6.0));
    p = @mulAdd(V, p, r, @splat(0.5));
    p = @mulAdd(V, p, r, @splat(1.0));
    p = @mulAdd(V, p, r, @splat(1.0));
    const ni: @Vector(N, i32) = @intFromFloat(n);
    const scale: V = @bitCast((ni + @as(@Vector(N, i32), @splat(127))) << @splat(23));
    return p * scale;
}

/// Sum of a vector's lanes as a tree (halves added pairwise), not the
/// strictly ordered chain `@reduce(.Add)` compiles to for floats.
pub inline fn treeSum(comptime N: usize, v: @Vector(N, f32)) f32 {
    if (N == 1) return v[0];
    const half = N / 2;
    const lo: @Vector(half, f32) = std.simd.extract(v, 0, half);
    const hi: @Vector(half, f32) = std.simd.extract(v, half, half);
    return treeSum(half, lo + hi);
}
/// Sums of N vectors of N lanes each, as one vector: lane i is
/// `treeSum(N, v[i])` bit for bit. Each level adds the lower half of every
/// segment to its upper half exactly as `treeSum` does, two vectors' segments
/// at a time (shuffles gather them), so N sums cost N - 1 vector additions
/// instead of N log2(N) narrowing steps.
pub inline fn treeSums(comptime N: usize, v: *[N]@Vector(N, f32)) @Vector(N, f32) {
    return treeLevels(N, N, N, v);
}

/// The levels of `treeSums` that `count` vectors go through to become one,
/// starting at segment length `seg`: on v[0..count], inputs 2k and 2k+1
/// becoming output k at each level. A level's arithmetic depends only on
/// its two inputs, so `treeLevels(N, N, 4, v[4j..][0..4])` is vector j of
/// `treeSums`' second level, and `treeLevels(N, N / 4, N / 4, those)` then
/// gives what `treeSums(N, v)` gives, bit for bit: a caller can reduce each
/// group of 4 vectors while it is still in registers.
pub inline fn treeLevels(comptime N: usize, comptime seg0: usize, comptime count0: usize, v: *[count0]@Vector(N, f32)) @Vector(N, f32) {
    comptime std.debug.assert(std.math.isPowerOfTwo(count0) and seg0 >= count0 and seg0 <= N);
    comptime var seg: usize = seg0; // segment length of the current level
    comptime var count: usize = count0; // vectors holding segments
    inline while (count > 1) {
        const half = seg / 2;
        // Output vector k takes the segments of inputs 2k and 2k+1: input
        // 2k's segments (N / seg of them) become the first half of lanes.
        const masks = comptime blk: {
            var lo: [N]i32 = undefined;
            var hi: [N]i32 = undefined;
            const per = N / seg; // segments per vector
            for (0..2) |src| {
                for (0..per) |s| {
                    for (0..half) |i| {
                        const out_lane = src * (N / 2) + s * half + i;
                        const in_lane = s * seg + i;
                        // @shuffle: indices >= 0 pick from a, ~i from b.
                        lo[out_lane] = if (src == 0) in_lane else ~@as(i32, in_lane);
                        hi[out_lane] = if (src == 0) in_lane + half else ~@as(i32, in_lane + half);
                    }
                }
            }
            break :blk .{ @as(@Vector(N, i32), lo), @as(@Vector(N, i32), hi) };
        };
        inline for (0..count / 2) |k| {
            const a = v[2 * k];
            const b = v[2 * k + 1];
            v[k] = @shuffle(f32, a, b, masks[0]) + @shuffle(f32, a, b, masks[1]);
        }
        seg = half;
        count /= 2;
    }
    return v[0];
}
