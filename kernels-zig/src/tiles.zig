//! Tiled matrices (.cflow/.vflow): one output stripe of one matrix at a
//! time. A tile is a 16-byte header, f16 scales [rows][groups], then
//! quantized data [rows][groups][16 or 32 bytes] (Q4_0, Q8_0), or f32
//! [rows][cols] (F32). The integer lanes of a group are the block
//! primitives of block_dots.zig (through kernels.zig); compiled once per
//! variant with kernels.zig (the same module).

const std = @import("std");
const abi = @import("abi.zig");
const k = @import("kernels.zig");

const assert = std.debug.assert;
const qk = abi.qk;
const BlockQ8_0 = abi.BlockQ8_0;
const BlockQ4_0 = abi.BlockQ4_0;
const V8i32 = @Vector(8, i32);
const V16i32 = @Vector(16, i32);
const variant = k.variant;
const isa = k.isa;
const is_wasm = k.is_wasm;
const lanes = k.lanes;
const lanesQ4_0x2 = k.lanesQ4_0x2;
const lanesQ8_0x2 = k.lanesQ8_0x2;
const lanesQ4_0x1Vnni = k.lanesQ4_0x1Vnni;
const lanesQ8_0x1Vnni = k.lanesQ8_0x1Vnni;
const lanesQ4_0x1Avx2 = k.lanesQ4_0x1Avx2;
const lanesQ8_0x1Avx2 = k.lanesQ8_0x1Avx2;
const lanesQ4_0x1Neon = k.lanesQ4_0x1Neon;
const lanesQ8_0x1Neon = k.lanesQ8_0x1Neon;
const wasmDotQ4_0 = k.wasmDotQ4_0;
const wasmDotQ8_0 = k.wasmDotQ8_0;

pub const tile_rows_max: usize = 128;
pub const tile_cols_max: usize = 256;
pub const tile_header_bytes: usize = 16;

pub const TileType = enum(u32) { q4_0 = 1, q8_0 = 2, f32 = 3 };

fn groupBytes(comptime t: TileType) usize {
    return switch (t) {
        .q4_0 => 16,
        .q8_0 => 32,
        .f32 => 0,
    };
}

/// Bytes of one tile of `rows x cols`.
pub fn tileBytes(t: TileType, rows: usize, cols: usize) usize {
    const groups = rows * ((cols + qk - 1) / qk);
    return tile_header_bytes + switch (t) {
        .q4_0 => groups * (2 + 16),
        .q8_0 => groups * (2 + 32),
        .f32 => rows * cols * 4,
    };
}

/// Bytes of one output stripe (rows [r0, r0 + tr)) of a matrix: its column tiles.
pub fn stripeBytes(t: TileType, tr: usize, cols: usize) usize {
    var total: usize = 0;
    var c0: usize = 0;
    while (c0 < cols) : (c0 += tile_cols_max) total += tileBytes(t, tr, @min(tile_cols_max, cols - c0));
    return total;
}

inline fn f16At(p: [*]const u8) f32 {
    return abi.f16ToF32(@as(u16, p[0]) | (@as(u16, p[1]) << 8));
}

/// Integer lanes of one (or two) quantized groups against Q8_0 activations.
fn QLanes(comptime t: TileType) type {
    return struct {
        const G = if (t == .q4_0) [16]u8 else [32]i8;
        inline fn one(w: *const G, x: *const [32]i8) V8i32 {
            return switch (variant) {
                .avx512vnni, .avxvnni => if (t == .q4_0) lanesQ4_0x1Vnni(w, x) else lanesQ8_0x1Vnni(w, x),
                .avx2 => if (t == .q4_0) lanesQ4_0x1Avx2(w, x) else lanesQ8_0x1Avx2(w, x),
                .neon, .neon_dotprod => if (t == .q4_0) lanesQ4_0x1Neon(w, x) else lanesQ8_0x1Neon(w, x),
                .scalar => unreachable,
            };
        }
        inline fn two(wa: *const G, wb: *const G, xa: *const [32]i8, xb: *const [32]i8) V16i32 {
            return if (t == .q4_0) lanesQ4_0x2(wa, wb, xa, xb) else lanesQ8_0x2(wa, wb, xa, xb);
        }
        fn scalarGroup(w: *const G, x: *const [32]i8) i32 {
            if (is_wasm) return if (t == .q4_0) wasmDotQ4_0(w, x) else wasmDotQ8_0(w, x);
            var sum: i32 = 0;
            if (t == .q4_0) {
                for (0..16) |j| {
                    sum += (@as(i32, w[j] & 15) - 8) * @as(i32, x[j]);
                    sum += (@as(i32, w[j] >> 4) - 8) * @as(i32, x[j + 16]);
                }
            } else {
                for (0..32) |j| sum += @as(i32, w[j]) * @as(i32, x[j]);
            }
            return sum;
        }
    };
}

/// y[r] for r in [0, tr) = row r of the stripe at `base` times x (Q8_0
/// blocks covering `cols`, zero-padded to whole groups). Column tiles are
/// summed left to right; each tile's row dot is computed group by group.
fn stripeQuant(comptime t: TileType, base: [*]const u8, tr: usize, cols: usize, x: []const BlockQ8_0, y: []f32) void {
    assert(tr >= 1 and tr <= tile_rows_max);
    assert(y.len == tr and x.len * qk >= cols);
    const gb = groupBytes(t);
    const L = QLanes(t);
    @memset(y, 0);
    var pos: usize = 0;
    var c0: usize = 0;
    while (c0 < cols) : (c0 += tile_cols_max) {
        const tc = @min(tile_cols_max, cols - c0);
        const ng = (tc + qk - 1) / qk;
        const xs = x[c0 / qk ..][0..ng];
        const scales = base + pos + tile_header_bytes;
        const data = scales + tr * ng * 2;
        for (0..tr) |r| {
            const srow = scales + r * ng * 2;
            const drow = data + r * ng * gb;
            var acc: f32 = 0;
            switch (isa) {
                .scalar => for (0..ng) |g| {
                    const w: *const L.G = @ptrCast(drow + g * gb);
                    const isum = L.scalarGroup(w, &xs[g].qs);
                    acc += @as(f32, @floatFromInt(isum)) * (f16At(srow + g * 2) * abi.f16ToF32(xs[g].d));
                },
                .avx2, .neon => {
                    var v: @Vector(8, f32) = @splat(0);
                    for (0..ng) |g| {
                        const w: *const L.G = @ptrCast(drow + g * gb);
                        const l: @Vector(8, f32) = @floatFromInt(L.one(w, &xs[g].qs));
                        v = @mulAdd(@Vector(8, f32), l, @splat(f16At(srow + g * 2) * abi.f16ToF32(xs[g].d)), v);
                    }
                    acc = @reduce(.Add, v);
                },
                .avx512 => {
                    var v: @Vector(16, f32) = @splat(0);
                    var g: usize = 0;
                    while (g + 2 <= ng) : (g += 2) {
                        const wa: *const L.G = @ptrCast(drow + g * gb);
                        const wb: *const L.G = @ptrCast(drow + (g + 1) * gb);
                        const l: @Vector(16, f32) = @floatFromInt(L.two(wa, wb, &xs[g].qs, &xs[g + 1].qs));
                        const sa: @Vector(8, f32) = @splat(f16At(srow + g * 2) * abi.f16ToF32(xs[g].d));
                        const sb: @Vector(8, f32) = @splat(f16At(srow + (g + 1) * 2) * abi.f16ToF32(xs[g + 1].d));
                        v = @mulAdd(@Vector(16, f32), l, std.simd.join(sa, sb), v);
                    }
                    acc = @reduce(.Add, v);
                    if (g < ng) {
                        const w: *const L.G = @ptrCast(drow + g * gb);
                        const l: @Vector(8, f32) = @floatFromInt(L.one(w, &xs[g].qs));
                        acc += @reduce(.Add, l) * (f16At(srow + g * 2) * abi.f16ToF32(xs[g].d));
                    }
                },
            }
            y[r] += acc;
        }
        pos += tileBytes(t, tr, tc);
    }
}

/// The same for F32 tiles with f32 activations.
fn stripeF32(base: [*]const u8, tr: usize, cols: usize, x: []const f32, y: []f32) void {
    assert(tr >= 1 and tr <= tile_rows_max);
    assert(y.len == tr and x.len >= cols);
    @memset(y, 0);
    var pos: usize = 0;
    var c0: usize = 0;
    while (c0 < cols) : (c0 += tile_cols_max) {
        const tc = @min(tile_cols_max, cols - c0);
        const w: [*]align(1) const f32 = @ptrCast(base + pos + tile_header_bytes);
        for (0..tr) |r| {
            const row = w + r * tc;
            const V = @Vector(lanes, f32);
            var v: V = @splat(0);
            var c: usize = 0;
            if (lanes > 1) {
                while (c + lanes <= tc) : (c += lanes) {
                    const a: V = row[c..][0..lanes].*;
                    const b: V = x[c0 + c ..][0..lanes].*;
                    v = @mulAdd(V, a, b, v);
                }
            }
            var acc: f32 = @reduce(.Add, v);
            while (c < tc) : (c += 1) acc += row[c] * x[c0 + c];
            y[r] += acc;
        }
        pos += tileBytes(.f32, tr, tc);
    }
}

/// One output stripe of a tiled matrix: dispatches on the tile type.
pub fn tileStripe(t: TileType, base: [*]const u8, tr: usize, cols: usize, xq: []const BlockQ8_0, xf: []const f32, y: []f32) void {
    switch (t) {
        .q4_0 => stripeQuant(.q4_0, base, tr, cols, xq, y),
        .q8_0 => stripeQuant(.q8_0, base, tr, cols, xq, y),
        .f32 => stripeF32(base, tr, cols, xf, y),
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

const testing = std.testing;
const scalar = k.scalar;
const randomQ8Blocks = k.randomQ8Blocks;
const randomQ4Blocks = k.randomQ4Blocks;
const absTermsQ4 = k.absTermsQ4;
const absTermsQ8 = k.absTermsQ8;
const expectCloseMag = k.expectCloseMag;

test "tiled stripes equal row-major dots" {
    var prng = std.Random.DefaultPrng.init(99);
    const rng = prng.random();
    const cols = 300; // two column tiles, a partial group
    const tr = 5;
    const ng_total = (cols + 31) / 32;
    var x: [ng_total]BlockQ8_0 = undefined;
    randomQ8Blocks(rng, &x, false);
    // padding of the last activation group: zero
    for (cols % 32..32) |j| x[ng_total - 1].qs[j] = 0;
    inline for (.{ TileType.q4_0, TileType.q8_0 }) |t| {
        const gb = groupBytes(t);
        var buf: [2 * (16 + tr * 8 * (2 + 32))]u8 = undefined;
        var rows: [tr][ng_total]if (t == .q4_0) BlockQ4_0 else BlockQ8_0 = undefined;
        for (&rows) |*row| {
            if (t == .q4_0) randomQ4Blocks(rng, row) else randomQ8Blocks(rng, row, true);
        }
        // build the two tiles
        var pos: usize = 0;
        var c0: usize = 0;
        while (c0 < cols) : (c0 += 256) {
            const tc = @min(256, cols - c0);
            const ng = (tc + 31) / 32;
            @memset(buf[pos..][0..16], 0);
            const sc = pos + 16;
            const dt = sc + tr * ng * 2;
            for (0..tr) |r| for (0..ng) |g| {
                const b = &rows[r][c0 / 32 + g];
                buf[sc + (r * ng + g) * 2] = @truncate(b.d);
                buf[sc + (r * ng + g) * 2 + 1] = @truncate(b.d >> 8);
                @memcpy(buf[dt + (r * ng + g) * gb ..][0..gb], std.mem.asBytes(&b.qs));
            };
            pos += tileBytes(t, tr, tc);
        }
        var y: [tr]f32 = undefined;
        tileStripe(t, &buf, tr, cols, &x, &[_]f32{}, &y);
        for (0..tr) |r| {
            const want = if (t == .q4_0) scalar.dotQ4_0(&rows[r], &x) else scalar.dotQ8_0(&rows[r], &x);
            const mag = if (t == .q4_0) absTermsQ4(&rows[r], &x) else absTermsQ8(&rows[r], &x);
            try expectCloseMag(want, y[r], 1e-5, mag);
        }
    }
}
