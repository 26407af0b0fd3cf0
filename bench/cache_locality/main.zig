//! Cache-locality probe: one kernel over one matrix per invocation, so that
//! `valgrind --tool=cachegrind` counts exactly that kernel (plus a setup that
//! a `setup` invocation of the same arguments measures alone, to subtract).
//!
//!   cache_locality setup|run tiled|rows|rows_f32x q4_0|q8_0 ROWS COLS
//!   cache_locality verify
//!
//! `tiled`: the matrix is stored as `.cflow` tiles (docs/FORMAT.md: 128 x 256
//! tiles emitted stripe by stripe, each a 16-byte header, the f16 scales
//! [rows][groups], then the quantized groups [rows][groups]) and multiplied
//! stripe by stripe with `kernels.tileStripe`, the code `cf_tiles_matvec`
//! runs per pool chunk.
//! `rows`: the same values stored row-major as ggml blocks (f16 scale next to
//! its quants, one row after the other) and multiplied with
//! `kernels.matvecRowsQ4_0`/`matvecRowsQ8_0`, the code `cf_matvec_q*_0` runs.
//! Both kernels take the same Q8_0 activation vector and do the same integer
//! block dots and f32 scaling (kernels.zig is imported unchanged); only the
//! weight layout and the order of the reads differ.
//!
//! `rows_f32x` (Q4_0 only): NOT a cflow kernel. The same row-major Q4_0
//! rows against the f32 activation (each block dequantized and multiplied
//! with 32 f32 inputs), the kind of naive baseline the report's 32 KB
//! activation at d = 8192 implies; measured only to test that explanation.
//!
//! `setup` builds everything `run` builds (matrix, activation, output) and
//! prints the same line, but does not call the kernel. `verify` checks both
//! kernels against an f64 reference on small shapes (run natively).
//!
//! Output: one JSON line on stdout.

const std = @import("std");
const k = @import("kernels");

const assert = std.debug.assert;

// The block types as the kernels declare them (kernels.zig keeps its abi
// import private; the parameter types name the very same structs).
const BlockQ4_0 = std.meta.Child(@typeInfo(@TypeOf(k.matvecRowsQ4_0)).@"fn".params[0].type.?);
const BlockQ8_0 = std.meta.Child(@typeInfo(@TypeOf(k.matvecRowsQ4_0)).@"fn".params[1].type.?);
const qk: usize = 32;

comptime {
    assert(@sizeOf(BlockQ4_0) == 18);
    assert(@sizeOf(BlockQ8_0) == 34);
    assert(k.tile_rows_max == 128 and k.tile_cols_max == 256);
}

const Mode = enum { setup, run };
const Layout = enum { tiled, rows, rows_f32x };
const Quant = enum { q4_0, q8_0 };

const rows_limit: usize = 1 << 20;
const cols_limit: usize = 1 << 20;

fn f32ToF16(x: f32) u16 {
    return @bitCast(@as(f16, @floatCast(x)));
}

fn f16ToF32(bits: u16) f32 {
    return @floatCast(@as(f16, @bitCast(bits)));
}

fn splitmix(state: u64) u64 {
    var z = state +% 0x9e3779b97f4a7c15;
    z = (z ^ (z >> 30)) *% 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) *% 0x94d049bb133111eb;
    return z ^ (z >> 31);
}

/// The weight block at (row, group): a pure function of its position, so
/// both layouts hold exactly the same values.
const Block = struct {
    scale_bits: u16,
    quants: [32]u8,
};

fn blockAt(quant: Quant, row: usize, group: usize, groups: usize) Block {
    const h0 = splitmix(@as(u64, row) * groups + group);
    var b: Block = .{ .scale_bits = f32ToF16(0.0005 + @as(f32, @floatFromInt(h0 % 97)) * 1e-5), .quants = undefined };
    const words: usize = if (quant == .q4_0) 2 else 4;
    var h = h0;
    for (0..words) |w| {
        h = splitmix(h);
        std.mem.writeInt(u64, b.quants[w * 8 ..][0..8], h, .little);
    }
    return b;
}

fn groupBytes(quant: Quant) usize {
    return if (quant == .q4_0) 16 else 32;
}

fn tileType(quant: Quant) k.TileType {
    return if (quant == .q4_0) .q4_0 else .q8_0;
}

/// Bytes of the whole matrix in one layout.
fn matrixBytes(layout: Layout, quant: Quant, rows: usize, cols: usize) usize {
    const groups = cols / qk;
    return switch (layout) {
        .rows, .rows_f32x => rows * groups * (2 + groupBytes(quant)),
        .tiled => blk: {
            var total: usize = 0;
            var r0: usize = 0;
            while (r0 < rows) : (r0 += k.tile_rows_max) total += k.stripeBytes(tileType(quant), @min(k.tile_rows_max, rows - r0), cols);
            break :blk total;
        },
    };
}

fn fillRows(quant: Quant, rows: usize, cols: usize, out: []u8) void {
    const groups = cols / qk;
    const bb = 2 + groupBytes(quant);
    assert(out.len == rows * groups * bb);
    for (0..rows) |r| {
        for (0..groups) |g| {
            const b = blockAt(quant, r, g, groups);
            const dst = out[(r * groups + g) * bb ..][0..bb];
            std.mem.writeInt(u16, dst[0..2], b.scale_bits, .little);
            @memcpy(dst[2..], b.quants[0 .. bb - 2]);
        }
    }
}

/// Writes the tiles exactly as docs/FORMAT.md lays them out (header fields
/// included, though the kernel reads only the payload).
fn fillTiled(quant: Quant, rows: usize, cols: usize, out: []u8) void {
    const groups = cols / qk;
    const gb = groupBytes(quant);
    var pos: usize = 0;
    var r0: usize = 0;
    while (r0 < rows) : (r0 += k.tile_rows_max) {
        const tr = @min(k.tile_rows_max, rows - r0);
        var c0: usize = 0;
        while (c0 < cols) : (c0 += k.tile_cols_max) {
            const tc = @min(k.tile_cols_max, cols - c0);
            const ng = tc / qk;
            const tile = out[pos..][0..k.tileBytes(tileType(quant), tr, tc)];
            const h = tile[0..k.tile_header_bytes];
            std.mem.writeInt(u16, h[0..2], 0, .little); // layer_id
            h[2] = 0; // matrix_id
            h[3] = 0xff; // expert_id
            std.mem.writeInt(u32, h[4..8], @intCast(r0), .little);
            std.mem.writeInt(u16, h[8..10], @truncate(c0), .little);
            std.mem.writeInt(u16, h[10..12], @intCast(tr), .little);
            std.mem.writeInt(u16, h[12..14], @intCast(tc), .little);
            std.mem.writeInt(u16, h[14..16], qk, .little);
            const scales = tile[k.tile_header_bytes..][0 .. tr * ng * 2];
            const data = tile[k.tile_header_bytes + tr * ng * 2 ..];
            assert(data.len == tr * ng * gb);
            for (0..tr) |r| {
                for (0..ng) |g| {
                    const b = blockAt(quant, r0 + r, c0 / qk + g, groups);
                    std.mem.writeInt(u16, scales[(r * ng + g) * 2 ..][0..2], b.scale_bits, .little);
                    @memcpy(data[(r * ng + g) * gb ..][0..gb], b.quants[0..gb]);
                }
            }
            pos += tile.len;
        }
    }
    assert(pos == out.len);
}

/// The activation vector, quantized to Q8_0 by the kernels' own quantizer.
fn makeActivation(cols: usize, xf: []f32, xq: []BlockQ8_0) void {
    assert(xf.len == cols and xq.len * qk == cols);
    var h: u64 = 0x5eed;
    for (xf) |*v| {
        h = splitmix(h);
        v.* = @as(f32, @floatFromInt(h >> 40)) / @as(f32, 1 << 24) * 2.0 - 1.0;
    }
    const ok = k.quantizeQ8_0(xf, xq);
    assert(ok);
}

/// The measured region of the tiled kernel: every output stripe in file
/// order, as `cf_tiles_matvec` runs them (one thread).
noinline fn runTiled(quant: Quant, w: []const u8, rows: usize, cols: usize, xq: []const BlockQ8_0, y: []f32) void {
    assert(y.len == rows);
    const t = tileType(quant);
    var pos: usize = 0;
    var r0: usize = 0;
    while (r0 < rows) : (r0 += k.tile_rows_max) {
        const tr = @min(k.tile_rows_max, rows - r0);
        k.tileStripe(t, w.ptr + pos, tr, cols, xq, &.{}, y[r0..][0..tr]);
        pos += k.stripeBytes(t, tr, cols);
    }
    assert(pos == w.len);
}

/// The measured region of the row-major kernel: every row, as
/// `cf_matvec_q*_0` runs them (one thread).
noinline fn runRows(quant: Quant, w: []const u8, rows: usize, xq: []const BlockQ8_0, y: []f32) void {
    assert(y.len == rows);
    switch (quant) {
        .q4_0 => {
            const blocks: [*]const BlockQ4_0 = @ptrCast(w.ptr);
            k.matvecRowsQ4_0(blocks[0 .. rows * xq.len], xq, y, 0, rows);
        },
        .q8_0 => {
            const blocks: [*]const BlockQ8_0 = @ptrCast(w.ptr);
            k.matvecRowsQ8_0(blocks[0 .. rows * xq.len], xq, y, 0, rows);
        },
    }
}

/// The explanatory baseline (not a cflow kernel): Q4_0 rows against the f32
/// activation, 32 inputs per block, 256-bit vectors where the target has them.
noinline fn runRowsF32(w: []const u8, rows: usize, xf: []const f32, y: []f32) void {
    assert(y.len == rows and xf.len % qk == 0);
    const nb = xf.len / qk;
    const blocks: [*]const BlockQ4_0 = @ptrCast(w.ptr);
    const V = @Vector(32, f32);
    for (0..rows, y) |r, *out| {
        var acc: V = @splat(0);
        for (blocks[r * nb ..][0..nb], 0..) |*b, g| {
            const q: @Vector(16, u8) = b.qs;
            const lo = q & @as(@Vector(16, u8), @splat(0x0f));
            const hi = q >> @as(@Vector(16, u3), @splat(4));
            const n: @Vector(32, i16) = std.simd.join(lo, hi);
            const wv: V = @floatFromInt(n - @as(@Vector(32, i16), @splat(8)));
            const xv: V = xf[g * qk ..][0..qk].*;
            acc = @mulAdd(V, wv * @as(V, @splat(f16ToF32(b.d))), xv, acc);
        }
        out.* = @reduce(.Add, acc);
    }
}

const Prepared = struct {
    w: []u8,
    xf: []f32,
    xq: []BlockQ8_0,
    y: []f32,

    fn init(layout: Layout, quant: Quant, rows: usize, cols: usize) !Prepared {
        const a = std.heap.page_allocator;
        const w = try a.alloc(u8, matrixBytes(layout, quant, rows, cols));
        switch (layout) {
            .rows, .rows_f32x => fillRows(quant, rows, cols, w),
            .tiled => fillTiled(quant, rows, cols, w),
        }
        const xf = try a.alloc(f32, cols);
        const xq = try a.alloc(BlockQ8_0, cols / qk);
        makeActivation(cols, xf, xq);
        const y = try a.alloc(f32, rows);
        @memset(y, 0);
        return .{ .w = w, .xf = xf, .xq = xq, .y = y };
    }

    fn deinit(p: *Prepared) void {
        const a = std.heap.page_allocator;
        a.free(p.w);
        a.free(p.xf);
        a.free(p.xq);
        a.free(p.y);
    }

    fn run(p: *Prepared, layout: Layout, quant: Quant, rows: usize, cols: usize) void {
        switch (layout) {
            .tiled => runTiled(quant, p.w, rows, cols, p.xq, p.y),
            .rows => runRows(quant, p.w, rows, p.xq, p.y),
            .rows_f32x => runRowsF32(p.w, rows, p.xf, p.y),
        }
    }
};

/// y = W x in f64 from the generated values, with the scale of the sum of
/// absolute terms (how far any summation order may move each result).
fn reference(quant: Quant, rows: usize, cols: usize, xq: []const BlockQ8_0, xf: ?[]const f32, y: []f64, mag: []f64) void {
    const groups = cols / qk;
    for (0..rows) |r| {
        var acc: f64 = 0;
        var abs_acc: f64 = 0;
        for (0..groups) |g| {
            const b = blockAt(quant, r, g, groups);
            var isum: i64 = 0;
            var iabs: i64 = 0;
            if (xf) |xs| {
                // f32 activation: sum d * (q - 8) * x directly.
                const d: f64 = f16ToF32(b.scale_bits);
                for (0..qk) |j| {
                    const n: f64 = @floatFromInt(if (j < 16) @as(i64, b.quants[j] & 15) - 8 else @as(i64, b.quants[j - 16] >> 4) - 8);
                    acc += d * n * xs[g * qk + j];
                    abs_acc += @abs(d * n * xs[g * qk + j]);
                }
                continue;
            }
            for (0..qk) |j| {
                const wq: i64 = switch (quant) {
                    .q4_0 => if (j < 16) @as(i64, b.quants[j] & 15) - 8 else @as(i64, b.quants[j - 16] >> 4) - 8,
                    .q8_0 => @as(i8, @bitCast(b.quants[j])),
                };
                const p = wq * xq[g].qs[j];
                isum += p;
                iabs += @intCast(@abs(p));
            }
            const s = @as(f64, f16ToF32(b.scale_bits)) * @as(f64, f16ToF32(xq[g].d));
            acc += @as(f64, @floatFromInt(isum)) * s;
            abs_acc += @as(f64, @floatFromInt(iabs)) * @abs(s);
        }
        y[r] = acc;
        mag[r] = abs_acc;
    }
}

fn verify(out: anytype) !void {
    const shapes = [_][2]usize{ .{ 300, 800 }, .{ 130, 8192 }, .{ 1, 32 } };
    var checked: usize = 0;
    for (shapes) |shape| {
        const rows, const cols = shape;
        for ([_]Quant{ .q4_0, .q8_0 }) |quant| {
            const a = std.heap.page_allocator;
            const want = try a.alloc(f64, rows);
            defer a.free(want);
            const mag = try a.alloc(f64, rows);
            defer a.free(mag);
            for ([_]Layout{ .tiled, .rows, .rows_f32x }) |layout| {
                if (layout == .rows_f32x and quant != .q4_0) continue;
                var p = try Prepared.init(layout, quant, rows, cols);
                defer p.deinit();
                reference(quant, rows, cols, p.xq, if (layout == .rows_f32x) p.xf else null, want, mag);
                p.run(layout, quant, rows, cols);
                for (p.y, want, mag, 0..) |got, w, m, r| {
                    if (@abs(@as(f64, got) - w) > 1e-5 * m + 1e-12) {
                        try out.print("{{\"verify\":\"fail\",\"layout\":\"{s}\",\"quant\":\"{s}\",\"rows\":{d},\"cols\":{d},\"row\":{d},\"got\":{e},\"want\":{e}}}\n", .{ @tagName(layout), @tagName(quant), rows, cols, r, got, w });
                        return error.VerifyFailed;
                    }
                    checked += 1;
                }
            }
        }
    }
    try out.print("{{\"verify\":\"ok\",\"variant\":\"{s}\",\"outputs_checked\":{d}}}\n", .{ @tagName(k.variant), checked });
}

fn usage() noreturn {
    std.debug.print("usage: cache_locality setup|run tiled|rows|rows_f32x q4_0|q8_0 ROWS COLS\n       cache_locality verify\n", .{});
    std.process.exit(2);
}

pub fn main() !void {
    const args = try std.process.argsAlloc(std.heap.page_allocator);
    defer std.process.argsFree(std.heap.page_allocator, args);
    const out = std.io.getStdOut().writer();
    if (args.len == 2 and std.mem.eql(u8, args[1], "verify")) return verify(out);
    if (args.len != 6) usage();
    const mode = std.meta.stringToEnum(Mode, args[1]) orelse usage();
    const layout = std.meta.stringToEnum(Layout, args[2]) orelse usage();
    const quant = std.meta.stringToEnum(Quant, args[3]) orelse usage();
    const rows = std.fmt.parseInt(usize, args[4], 10) catch usage();
    const cols = std.fmt.parseInt(usize, args[5], 10) catch usage();
    if (rows == 0 or rows > rows_limit or cols == 0 or cols > cols_limit or cols % qk != 0) usage();
    if (layout == .rows_f32x and quant != .q4_0) usage();

    var p = try Prepared.init(layout, quant, rows, cols);
    defer p.deinit();
    if (mode == .run) p.run(layout, quant, rows, cols);

    var sum: f64 = 0;
    var abs_sum: f64 = 0;
    for (p.y) |v| {
        sum += v;
        abs_sum += @abs(v);
    }
    try out.print("{{\"mode\":\"{s}\",\"layout\":\"{s}\",\"quant\":\"{s}\",\"variant\":\"{s}\",\"rows\":{d},\"cols\":{d},\"weight_bytes\":{d},\"activation_bytes\":{d},\"y_sum\":{e},\"y_abs_sum\":{e}}}\n", .{
        @tagName(mode), @tagName(layout),              @tagName(quant), @tagName(k.variant), rows, cols,
        p.w.len,        p.xq.len * @sizeOf(BlockQ8_0), sum,             abs_sum,
    });
}
