//! libcflow_kernels: the C ABI that Deno binds with `Deno.dlopen`.
//!
//! Every export validates what it is given (null pointers, lengths against
//! the sizes they must hold, alignment, ranges) and returns a status code
//! from `abi.Status`; only then does it call the selected variant's kernel.
//! The TypeScript wrappers in ffi/ check the same things first: both sides
//! check, neither trusts the other.

const std = @import("std");
const builtin = @import("builtin");
const abi = @import("abi.zig");
const plan = @import("plan.zig");
const Table = @import("table.zig").Table;

/// The wasm32 build (`zig build wasm`) compiles this same root with three
/// stand-ins: no cpuid (cpu_wasm.zig), no threads (pool_wasm.zig), regions
/// in linear memory instead of mmap (memory_wasm.zig). Every export keeps
/// its name, checks and status codes.
pub const is_wasm = builtin.cpu.arch == .wasm32;
const cpu = switch (builtin.cpu.arch) {
    .wasm32 => @import("cpu_wasm.zig"),
    .aarch64 => @import("cpu_arm.zig"),
    else => @import("cpu.zig"),
};
const memory = if (is_wasm) @import("memory_wasm.zig") else @import("memory.zig");
const pool_mod = if (is_wasm) @import("pool_wasm.zig") else @import("pool.zig");
/// Direct reads and staging (io.zig): native only; the wasm32 build exports
/// the same symbols returning `unsupported`.
const io = if (is_wasm) struct {} else @import("io.zig");
/// Explicit prefetch (claim 6): native only.
const prefetch = if (is_wasm) struct {} else @import("prefetch.zig");
/// /proc/self sizes for cf_peak_rss and cf_memory_usage: native only.
const proc_status = if (is_wasm) struct {} else @import("proc_status.zig");

const assert = std.debug.assert;
const Status = abi.Status;
const qk = abi.qk;

/// The variant objects this build links (abi.variantsOf its architecture;
/// wasm32 links the scalar object only).
const linked = abi.variantsOf(builtin.cpu.arch);
const max_variant_id = blk: {
    var m: u32 = 0;
    for (std.enums.values(abi.Variant)) |v| m = @max(m, @intFromEnum(v));
    break :blk m;
};

/// Indexed by variant id - 1; null for a variant of another architecture.
const tables: [max_variant_id]?Table = blk: {
    var t: [max_variant_id]?Table = @splat(null);
    for (linked) |v| t[@intFromEnum(v) - 1] = Table.bind(@tagName(v));
    break :blk t;
};

var init_lock: std.Thread.Mutex = .{};
/// Held while a job runs on the pool; a second concurrent caller (a
/// nonblocking FFI call) runs its job on its own thread instead.
var pool_lock: std.Thread.Mutex = .{};
var pool: pool_mod.Pool = .{};
var active: std.atomic.Value(u32) = .init(0);

fn table() ?*const Table {
    const v = active.load(.acquire);
    if (v == 0) return null;
    return &(tables[v - 1].?);
}

fn ok() i32 {
    return Status.ok.code();
}

// ---------------------------------------------------------------------------
// Argument checks
// ---------------------------------------------------------------------------

const CheckError = error{ InvalidArg, Length, Alignment, Overflow };

fn statusOf(e: CheckError) i32 {
    return switch (e) {
        error.InvalidArg => Status.invalid_arg.code(),
        error.Length => Status.length.code(),
        error.Alignment => Status.alignment.code(),
        error.Overflow => Status.overflow.code(),
    };
}

/// A typed many-pointer from an untyped one, after checking it is non-null
/// and aligned for T.
fn typed(comptime T: type, p: ?*const anyopaque) CheckError![*]const T {
    const raw = p orelse return error.InvalidArg;
    if (@intFromPtr(raw) % @alignOf(T) != 0) return error.Alignment;
    return @ptrCast(@alignCast(raw));
}

fn typedMut(comptime T: type, p: ?*anyopaque) CheckError![*]T {
    const raw = p orelse return error.InvalidArg;
    if (@intFromPtr(raw) % @alignOf(T) != 0) return error.Alignment;
    return @ptrCast(@alignCast(raw));
}

fn mul(a: usize, b: usize) CheckError!usize {
    return std.math.mul(usize, a, b) catch error.Overflow;
}

/// Blocks in n elements; n must be a positive multiple of 32.
fn blocksOf(n: usize) CheckError!usize {
    if (n == 0) return error.InvalidArg;
    if (n % qk != 0) return error.Length;
    return n / qk;
}

fn need(have: usize, want: usize) CheckError!void {
    if (have < want) return error.Length;
}

// ---------------------------------------------------------------------------
// Library lifecycle and introspection
// ---------------------------------------------------------------------------

/// uint32_t cf_abi_version(void)
export fn cf_abi_version() u32 {
    return abi.abi_version;
}

const build_info = std.fmt.comptimePrint("zig {s}; {s}; {s}-{s}-{s}", .{
    builtin.zig_version_string,
    @tagName(builtin.mode),
    @tagName(builtin.cpu.arch),
    @tagName(builtin.os.tag),
    @tagName(builtin.abi),
});

/// size_t cf_build_info(uint8_t *buf, size_t len): copies up to len bytes of
/// a description of the build; returns its full length.
export fn cf_build_info(buf: ?[*]u8, len: usize) usize {
    if (buf) |b| {
        const n = @min(len, build_info.len);
        @memcpy(b[0..n], build_info[0..n]);
    }
    return build_info.len;
}

/// size_t cf_cpu_model(uint8_t *buf, size_t len): copies up to len bytes of
/// the CPU's brand string; returns its full length.
export fn cf_cpu_model(buf: ?[*]u8, len: usize) usize {
    var storage: [48]u8 = undefined;
    const name = cpu.brand(&storage);
    if (buf) |b| {
        const n = @min(len, name.len);
        @memcpy(b[0..n], name[0..n]);
    }
    return name.len;
}

/// uint64_t cf_cpu_features(void): feature bits of this CPU (cpu.Feature).
export fn cf_cpu_features() u64 {
    return cpu.detect();
}

/// int32_t cf_variant_supported(uint32_t variant, uint64_t disable_mask)
export fn cf_variant_supported(variant: u32, disable_mask: u64) i32 {
    const v = std.meta.intToEnum(abi.Variant, variant) catch return Status.invalid_arg.code();
    return @intFromBool(cpu.supports(cpu.detect() & ~disable_mask, v));
}

/// uint64_t cf_peak_rss(void): the process's peak resident set in bytes
/// (VmHWM of /proc/self/status; getrusage's ru_maxrss where that cannot be
/// read), 0 if unavailable. Deno cannot read /proc/self without full
/// permissions, so the library reports it. ru_maxrss alone is wrong for a
/// child process: Linux carries it over from the parent at fork and exec,
/// so a small child of a large parent reported the parent's peak.
export fn cf_peak_rss() u64 {
    if (is_wasm) return 0; // the host reports it (ffi/wasm_backend.ts)
    var hwm: [1]u64 = undefined;
    if (proc_status.readKb("/proc/self/status", &.{"VmHWM:"}, &hwm)) return hwm[0];
    const usage = std.posix.getrusage(std.posix.rusage.SELF);
    if (usage.maxrss <= 0) return 0;
    return @as(u64, @intCast(usage.maxrss)) * 1024;
}

/// int32_t cf_memory_usage(uint64_t out[4]): RSS, PSS, Pss_File and
/// Pss_Anon of this process in bytes, from /proc/self/smaps_rollup (which
/// Deno cannot read without full permissions). 0, or a status when the file
/// cannot be read (not Linux, no smaps_rollup) or lacks a field.
export fn cf_memory_usage(out: ?[*]u8, out_len: usize) i32 {
    if (is_wasm) return Status.unsupported.code();
    const dst = out orelse return Status.invalid_arg.code();
    if (out_len != 32) return Status.length.code();
    var values: [4]u64 = undefined;
    if (!proc_status.readKb("/proc/self/smaps_rollup", &.{ "Rss:", "Pss:", "Pss_File:", "Pss_Anon:" }, &values)) {
        return Status.unsupported.code();
    }
    for (values, 0..) |v, i| std.mem.writeInt(u64, dst[i * 8 ..][0..8], v, .little);
    return Status.ok.code();
}

/// int32_t cf_trim_heap(void): hands the free pages of every C heap arena
/// back to the OS (glibc's `malloc_trim(0)`): 1 if any were released, 0 if
/// none, `unsupported` where the C library has no malloc_trim (wasm, not
/// glibc). A model's load frees what it built from (the file's metadata,
/// conversion and packing temporaries of the runtime); glibc keeps freed
/// pages of a thread's arena resident until asked.
export fn cf_trim_heap() i32 {
    if (comptime is_wasm or !builtin.target.isGnuLibC()) return Status.unsupported.code();
    const libc = struct {
        extern "c" fn malloc_trim(pad: usize) c_int;
    };
    return @intFromBool(libc.malloc_trim(0) != 0);
}

/// int32_t cf_set_prefetch(uint32_t on): turns the explicit prefetch thread
/// on (1: plans post the next matrix and the next selected expert to it) or
/// off (0). Off by default; unsupported (-5) in the wasm build.
export fn cf_set_prefetch(on: u32) i32 {
    if (is_wasm) return Status.unsupported.code();
    if (on > 1) return Status.invalid_arg.code();
    prefetch.setEnabled(on == 1);
    return Status.ok.code();
}

/// How one-token panel kernels prefetch (cf_set_panel_prefetch): 0 as the CPU
/// suggests, 1 always, 2 never. Applied by cf_init and by the setter.
var panel_prefetch_mode: u32 = 0;

/// Sets every linked variant's panel prefetch from `panel_prefetch_mode`;
/// returns whether it is on. Called under init_lock.
fn applyPanelPrefetch() bool {
    const on = switch (panel_prefetch_mode) {
        0 => cpu.panelPrefetchPays(),
        1 => true,
        else => false,
    };
    // Several tokens prefetch by the vendor whatever the mode (to L2 on AMD).
    const bits = @as(u32, @intFromBool(on)) | (@as(u32, @intFromBool(cpu.isAmd())) << 1);
    for (linked) |v| tables[@intFromEnum(v) - 1].?.set_panel_prefetch(bits);
    return on;
}

/// int32_t cf_set_panel_prefetch(uint32_t mode): whether one-token panel
/// kernels prefetch ahead of the panels they stream (panels.zig
/// `panel_prefetch`; several tokens always do, to L2 on AMD and to L1
/// elsewhere: `multi_prefetch_l2`): 0 as the CPU suggests (off on AMD, on elsewhere), 1 on, 2 off. Returns 1
/// or 0, the state now in force, or a status. Kept across cf_init; no kernel
/// may run concurrently with it.
export fn cf_set_panel_prefetch(mode: u32) i32 {
    if (mode > 2) return Status.invalid_arg.code();
    init_lock.lock();
    defer init_lock.unlock();
    panel_prefetch_mode = mode;
    return @intFromBool(applyPanelPrefetch());
}

/// uint32_t cf_physical_cores(void)
export fn cf_physical_cores() u32 {
    return cpu.physicalCores();
}

/// int32_t cf_init(uint32_t variant, uint32_t threads, uint64_t disable_mask)
///
/// variant: 0 = best for this CPU, else an abi.Variant. threads: 0 = the
/// physical core count. disable_mask: feature bits to treat as absent.
/// Returns the active variant (> 0) or a status code. May be called again
/// to change either; no kernel may run concurrently with it.
export fn cf_init(variant: u32, threads: u32, disable_mask: u64) i32 {
    init_lock.lock();
    defer init_lock.unlock();
    const features = cpu.detect() & ~disable_mask;
    const chosen: abi.Variant = if (variant == 0)
        cpu.best(features)
    else
        std.meta.intToEnum(abi.Variant, variant) catch return Status.invalid_arg.code();
    if (!cpu.supports(features, chosen)) return Status.unsupported.code();
    const n_threads: u32 = if (threads == 0) @min(cpu.physicalCores(), pool_mod.max_threads) else threads;
    if (n_threads > pool_mod.max_threads) return Status.limit.code();

    pool_lock.lock();
    defer pool_lock.unlock();
    if (pool.threads() != n_threads) {
        pool.stop();
        pool.start(n_threads) catch {
            pool.stop();
            active.store(0, .release);
            return Status.no_memory.code();
        };
    }
    _ = applyPanelPrefetch();
    active.store(@intFromEnum(chosen), .release);
    return @intCast(@intFromEnum(chosen));
}

/// uint32_t cf_variant(void): the active variant, 0 before cf_init.
export fn cf_variant() u32 {
    return active.load(.acquire);
}

/// uint32_t cf_threads(void)
export fn cf_threads() u32 {
    return pool.threads();
}

/// void cf_shutdown(void): stops the workers; cf_init starts them again.
export fn cf_shutdown() void {
    init_lock.lock();
    defer init_lock.unlock();
    pool_lock.lock();
    defer pool_lock.unlock();
    pool.stop();
    if (!is_wasm) io.shutdown();
    if (!is_wasm) prefetch.shutdown();
    active.store(0, .release);
}

/// Runs when the library is unloaded (Deno closes a library when the
/// program that opened it ends, e.g. between test modules) and at process
/// exit: the pool's workers run this library's code, so they are stopped
/// and joined before it is unmapped. A worker left spinning would jump into
/// unmapped memory (SIGSEGV).
fn unload() callconv(.c) void {
    cf_shutdown();
}

comptime {
    if (!is_wasm) {
        const entry: *const fn () callconv(.c) void = &unload;
        @export(&entry, .{ .name = "cflow_unload_entry", .section = ".fini_array", .linkage = .strong, .visibility = .hidden });
    }
}

fn runPooled(job: pool_mod.Job) void {
    if (pool_lock.tryLock()) {
        defer pool_lock.unlock();
        pool.run(job);
    } else {
        job.run(job.ctx, 0, job.items);
    }
}

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

/// int32_t cf_quantize_q8_0(const float *x, size_t n, uint8_t *out, size_t out_len)
export fn cf_quantize_q8_0(x: ?*const anyopaque, n: usize, out: ?*anyopaque, out_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return quantizeQ8_0(t, x, n, out, out_len) catch |e| statusOf(e);
}

fn quantizeQ8_0(t: *const Table, x_raw: ?*const anyopaque, n: usize, out_raw: ?*anyopaque, out_len: usize) CheckError!i32 {
    const x = try typed(f32, x_raw);
    const out = try typedMut(abi.BlockQ8_0, out_raw);
    const nb = try blocksOf(n);
    try need(out_len, try mul(nb, abi.q8_0_block_bytes));
    if (!t.quantize_q8_0(x, nb, out)) return Status.nonfinite.code();
    return ok();
}

/// int32_t cf_block_dots_q4_0_q8_0(const uint8_t *w, size_t w_len,
///     const uint8_t *x, size_t x_len, size_t n_blocks, int32_t *out, size_t out_len)
export fn cf_block_dots_q4_0_q8_0(w: ?*const anyopaque, w_len: usize, x: ?*const anyopaque, x_len: usize, n_blocks: usize, out: ?*anyopaque, out_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return blockDots(t, .q4_0, w, w_len, x, x_len, n_blocks, out, out_len) catch |e| statusOf(e);
}

/// int32_t cf_block_dots_q8_0_q8_0(...) as cf_block_dots_q4_0_q8_0.
export fn cf_block_dots_q8_0_q8_0(w: ?*const anyopaque, w_len: usize, x: ?*const anyopaque, x_len: usize, n_blocks: usize, out: ?*anyopaque, out_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return blockDots(t, .q8_0, w, w_len, x, x_len, n_blocks, out, out_len) catch |e| statusOf(e);
}

const WeightType = enum { q4_0, q8_0 };

fn blockBytes(wt: WeightType) usize {
    return switch (wt) {
        .q4_0 => abi.q4_0_block_bytes,
        .q8_0 => abi.q8_0_block_bytes,
    };
}

fn blockDots(t: *const Table, comptime wt: WeightType, w_raw: ?*const anyopaque, w_len: usize, x_raw: ?*const anyopaque, x_len: usize, n_blocks: usize, out_raw: ?*anyopaque, out_len: usize) CheckError!i32 {
    if (n_blocks == 0) return error.InvalidArg;
    const out = try typedMut(i32, out_raw);
    try need(w_len, try mul(n_blocks, blockBytes(wt)));
    try need(x_len, try mul(n_blocks, abi.q8_0_block_bytes));
    try need(out_len, n_blocks);
    const x = try typed(abi.BlockQ8_0, x_raw);
    switch (wt) {
        .q4_0 => t.block_dots_q4_0(try typed(abi.BlockQ4_0, w_raw), x, n_blocks, out),
        .q8_0 => t.block_dots_q8_0(try typed(abi.BlockQ8_0, w_raw), x, n_blocks, out),
    }
    return ok();
}

/// int32_t cf_dot_q4_0_q8_0(const uint8_t *w, size_t w_len, const uint8_t *x,
///     size_t x_len, size_t n, float *out): out[0] = dot of n elements.
export fn cf_dot_q4_0_q8_0(w: ?*const anyopaque, w_len: usize, x: ?*const anyopaque, x_len: usize, n: usize, out: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return matvec(t, .q4_0, w, w_len, 1, n, x, x_len, out, 1) catch |e| statusOf(e);
}

/// int32_t cf_dot_q8_0_q8_0(...) as cf_dot_q4_0_q8_0.
export fn cf_dot_q8_0_q8_0(w: ?*const anyopaque, w_len: usize, x: ?*const anyopaque, x_len: usize, n: usize, out: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return matvec(t, .q8_0, w, w_len, 1, n, x, x_len, out, 1) catch |e| statusOf(e);
}

/// int32_t cf_matvec_q4_0(const uint8_t *w, size_t w_len, size_t rows, size_t cols,
///     const uint8_t *x, size_t x_len, float *y, size_t y_len): y = W x over the pool.
export fn cf_matvec_q4_0(w: ?*const anyopaque, w_len: usize, rows: usize, cols: usize, x: ?*const anyopaque, x_len: usize, y: ?*anyopaque, y_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return matvec(t, .q4_0, w, w_len, rows, cols, x, x_len, y, y_len) catch |e| statusOf(e);
}

/// int32_t cf_matvec_q8_0(...) as cf_matvec_q4_0.
export fn cf_matvec_q8_0(w: ?*const anyopaque, w_len: usize, rows: usize, cols: usize, x: ?*const anyopaque, x_len: usize, y: ?*anyopaque, y_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return matvec(t, .q8_0, w, w_len, rows, cols, x, x_len, y, y_len) catch |e| statusOf(e);
}

fn MatvecCtx(comptime wt: WeightType) type {
    const W = switch (wt) {
        .q4_0 => abi.BlockQ4_0,
        .q8_0 => abi.BlockQ8_0,
    };
    return struct {
        t: *const Table,
        w: [*]const W,
        x: [*]const abi.BlockQ8_0,
        nb: usize,
        y: [*]f32,

        fn run(ctx: *const anyopaque, begin: usize, end: usize) void {
            const self: *const @This() = @ptrCast(@alignCast(ctx));
            switch (wt) {
                .q4_0 => self.t.matvec_rows_q4_0(self.w, self.x, self.nb, self.y, begin, end),
                .q8_0 => self.t.matvec_rows_q8_0(self.w, self.x, self.nb, self.y, begin, end),
            }
        }
    };
}

/// Rows per pool chunk: about 64 KiB of weights, at least one row.
fn chunkRows(row_bytes: usize) usize {
    return @max(1, (64 * 1024) / @max(1, row_bytes));
}

fn matvec(t: *const Table, comptime wt: WeightType, w_raw: ?*const anyopaque, w_len: usize, rows: usize, cols: usize, x_raw: ?*const anyopaque, x_len: usize, y_raw: ?*anyopaque, y_len: usize) CheckError!i32 {
    if (rows == 0) return error.InvalidArg;
    const nb = try blocksOf(cols);
    const row_bytes = try mul(nb, blockBytes(wt));
    try need(w_len, try mul(rows, row_bytes));
    try need(x_len, try mul(nb, abi.q8_0_block_bytes));
    try need(y_len, rows);
    const y = try typedMut(f32, y_raw);
    const x = try typed(abi.BlockQ8_0, x_raw);
    const W = switch (wt) {
        .q4_0 => abi.BlockQ4_0,
        .q8_0 => abi.BlockQ8_0,
    };
    const ctx = MatvecCtx(wt){ .t = t, .w = try typed(W, w_raw), .x = x, .nb = nb, .y = y };
    runPooled(.{ .run = MatvecCtx(wt).run, .ctx = &ctx, .items = rows, .chunk = chunkRows(row_bytes) });
    return ok();
}

/// int32_t cf_rms_norm(const float *x, const float *weight, size_t n, float eps, float *out)
export fn cf_rms_norm(x: ?*const anyopaque, weight: ?*const anyopaque, n: usize, eps: f32, out: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n == 0 or !std.math.isFinite(eps) or eps < 0) return Status.invalid_arg.code();
    const xp = typed(f32, x) catch |e| return statusOf(e);
    const wp = typed(f32, weight) catch |e| return statusOf(e);
    const op = typedMut(f32, out) catch |e| return statusOf(e);
    t.rms_norm(xp, wp, n, eps, op);
    return ok();
}

/// int32_t cf_softmax(float *x, size_t n): in place; -7 (x unchanged) if x
/// holds NaN or +inf or is all -inf.
export fn cf_softmax(x: ?*anyopaque, n: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n == 0) return Status.invalid_arg.code();
    const xp = typedMut(f32, x) catch |e| return statusOf(e);
    return if (t.softmax(xp, n)) ok() else Status.nonfinite.code();
}

/// int32_t cf_argmax_f32(const float *x, size_t n, uint64_t *index): the
/// greedy pick. 0 with *index the first position of the largest value (ties:
/// the lowest), or n when every value is -inf; -7 with *index the first NaN
/// or +inf.
export fn cf_argmax_f32(x: ?*const anyopaque, n: usize, index: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n == 0) return Status.invalid_arg.code();
    const xp = typed(f32, x) catch |e| return statusOf(e);
    const out = typedMut(u64, index) catch |e| return statusOf(e);
    var at: usize = undefined;
    const status = t.argmax(xp, n, &at);
    out[0] = at;
    return switch (status) {
        0, 1 => ok(),
        2 => Status.nonfinite.code(),
        else => unreachable,
    };
}

/// int32_t cf_rope(float *x, size_t x_len, size_t n_heads, size_t head_dim,
///     size_t n_rot, uint32_t pos, const float *inv_freq, size_t inv_freq_len, uint32_t mode)
export fn cf_rope(x: ?*anyopaque, x_len: usize, n_heads: usize, head_dim: usize, n_rot: usize, pos: u32, inv_freq: ?*const anyopaque, inv_freq_len: usize, mode: u32) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (mode > 1 or n_heads == 0 or head_dim == 0) return Status.invalid_arg.code();
    if (n_rot == 0 or n_rot % 2 != 0 or n_rot > head_dim) return Status.invalid_arg.code();
    if (pos > abi.rope_max_pos) return Status.range.code();
    const total = mul(n_heads, head_dim) catch |e| return statusOf(e);
    if (x_len < total or inv_freq_len < n_rot / 2) return Status.length.code();
    const xp = typedMut(f32, x) catch |e| return statusOf(e);
    const fp = typed(f32, inv_freq) catch |e| return statusOf(e);
    t.rope(xp, n_heads, head_dim, n_rot, pos, fp, mode);
    return ok();
}

/// int32_t cf_silu_mul(const float *gate, const float *up, float *out, size_t n)
export fn cf_silu_mul(gate: ?*const anyopaque, up: ?*const anyopaque, out: ?*anyopaque, n: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return gated(t.silu_mul, gate, up, out, n);
}

/// int32_t cf_gelu_mul(const float *gate, const float *up, float *out, size_t n)
export fn cf_gelu_mul(gate: ?*const anyopaque, up: ?*const anyopaque, out: ?*anyopaque, n: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return gated(t.gelu_mul, gate, up, out, n);
}

fn gated(f: anytype, gate: ?*const anyopaque, up: ?*const anyopaque, out: ?*anyopaque, n: usize) i32 {
    if (n == 0) return Status.invalid_arg.code();
    const g = typed(f32, gate) catch |e| return statusOf(e);
    const u = typed(f32, up) catch |e| return statusOf(e);
    const o = typedMut(f32, out) catch |e| return statusOf(e);
    f(g, u, o, n);
    return ok();
}

/// wasm32 has no 64-bit atomics and no threads: a u64 with the same calls.
/// Volatile, because the job writes it through the context's const pointer.
const PlainFold = struct {
    raw: u64,
    fn init(v: u64) PlainFold {
        return .{ .raw = v };
    }
    fn fetchXor(self: *PlainFold, v: u64, comptime _: std.builtin.AtomicOrder) u64 {
        const p: *volatile u64 = &self.raw;
        const old = p.*;
        p.* = old ^ v;
        return old;
    }
    fn load(self: *const PlainFold, comptime _: std.builtin.AtomicOrder) u64 {
        const p: *const volatile u64 = &self.raw;
        return p.*;
    }
};

const StreamCtx = struct {
    t: *const Table,
    p: [*]const u8,
    fold: if (is_wasm) PlainFold else std.atomic.Value(u64) = .init(0),

    fn run(ctx: *const anyopaque, begin: usize, end: usize) void {
        const self: *StreamCtx = @constCast(@as(*const StreamCtx, @ptrCast(@alignCast(ctx))));
        const r = self.t.stream_read(self.p + begin, end - begin);
        _ = self.fold.fetchXor(r, .monotonic);
    }
};

/// int32_t cf_stream_read(const uint8_t *p, size_t len, uint64_t *out):
/// reads every byte once over the pool (the bandwidth yardstick).
export fn cf_stream_read(p: ?*const anyopaque, len: usize, out: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (len == 0) return Status.invalid_arg.code();
    const bytes = typed(u8, p) catch |e| return statusOf(e);
    const o = typedMut(u64, out) catch |e| return statusOf(e);
    var ctx = StreamCtx{ .t = t, .p = bytes };
    // 1 MiB chunks: 128-byte multiples so the fold is independent of the split.
    runPooled(.{ .run = StreamCtx.run, .ctx = &ctx, .items = len, .chunk = 1 << 20 });
    o[0] = ctx.fold.load(.monotonic);
    return ok();
}

// ---------------------------------------------------------------------------
// Tiled matrices and attention
// ---------------------------------------------------------------------------

const kern = struct {
    const tile_rows: usize = 128;
    const tile_cols: usize = 256;
    fn tileBytes(t: u32, rows: usize, cols: usize) usize {
        const groups = rows * ((cols + qk - 1) / qk);
        return 16 + switch (t) {
            1 => groups * 18,
            2 => groups * 34,
            else => rows * cols * 4,
        };
    }
    fn stripeBytes(t: u32, tr: usize, cols: usize) usize {
        var total: usize = 0;
        var c0: usize = 0;
        while (c0 < cols) : (c0 += tile_cols) total += tileBytes(t, tr, @min(tile_cols, cols - c0));
        return total;
    }
};

pub const max_members: usize = 8;

const TilesCtx = struct {
    t: *const Table,
    tile_type: u32,
    base: [*]const u8,
    cols: usize,
    n_members: usize,
    rows: [max_members]usize,
    stripes: [max_members]usize,
    full: [max_members]usize,
    last: [max_members]usize,
    y_off: [max_members]usize,
    xq: [*]const abi.BlockQ8_0,
    xq_len: usize,
    xf: [*]const f32,
    xf_len: usize,
    y: [*]f32,

    /// Bytes of member m's stripes [0, s).
    fn before(self: *const TilesCtx, m: usize, s: usize) usize {
        const ns = self.stripes[m];
        if (s >= ns) return (ns - 1) * self.full[m] + self.last[m];
        return s * self.full[m];
    }

    fn run(ctx: *const anyopaque, begin: usize, end: usize) void {
        const self: *const TilesCtx = @ptrCast(@alignCast(ctx));
        for (begin..end) |s| {
            var pos: usize = 0;
            for (0..self.n_members) |m| pos += self.before(m, s);
            for (0..self.n_members) |m| {
                if (s >= self.stripes[m]) continue;
                const r0 = s * kern.tile_rows;
                const tr = @min(kern.tile_rows, self.rows[m] - r0);
                self.t.tile_stripe(self.tile_type, self.base + pos, tr, self.cols, self.xq, self.xq_len, self.xf, self.xf_len, self.y + self.y_off[m] + r0);
                pos += if (s + 1 == self.stripes[m]) self.last[m] else self.full[m];
            }
        }
    }
};

/// int32_t cf_tiles_matvec(int32_t handle, size_t offset, size_t length, uint32_t tile_type,
///     size_t cols, uint32_t n_members, const uint32_t *member_rows,
///     const uint8_t *xq, size_t xq_len, const float *xf, size_t xf_len, float *y, size_t y_len)
///
/// y = W x for the tiled run [offset, offset + length) of a mapped region:
/// one matrix, or up to 8 interleaved by output stripe (fused Q/K/V,
/// gate/up), whose outputs land one after another in y. Quantized tiles
/// take Q8_0 activations (xq), F32 tiles f32 ones (xf).
export fn cf_tiles_matvec(handle: i32, offset: usize, length: usize, tile_type: u32, cols: usize, n_members: u32, member_rows: ?*const anyopaque, xq: ?*const anyopaque, xq_len: usize, xf: ?*const anyopaque, xf_len: usize, y: ?*anyopaque, y_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return tilesMatvec(t, handle, offset, length, tile_type, cols, n_members, member_rows, xq, xq_len, xf, xf_len, y, y_len) catch |e| statusOf(e);
}

fn tilesMatvec(t: *const Table, handle: i32, offset: usize, length: usize, tile_type: u32, cols: usize, n_members: u32, member_rows: ?*const anyopaque, xq_raw: ?*const anyopaque, xq_len: usize, xf_raw: ?*const anyopaque, xf_len: usize, y_raw: ?*anyopaque, y_len: usize) CheckError!i32 {
    if (tile_type < 1 or tile_type > 3 or cols == 0 or cols > (1 << 20)) return error.InvalidArg;
    if (n_members == 0 or n_members > max_members) return error.InvalidArg;
    const rows_in = try typed(u32, member_rows);
    var ctx = TilesCtx{
        .t = t,
        .tile_type = tile_type,
        .base = undefined,
        .cols = cols,
        .n_members = n_members,
        .rows = undefined,
        .stripes = undefined,
        .full = undefined,
        .last = undefined,
        .y_off = undefined,
        .xq = undefined,
        .xq_len = 0,
        .xf = undefined,
        .xf_len = 0,
        .y = try typedMut(f32, y_raw),
    };
    var total_rows: usize = 0;
    var expected: usize = 0;
    var max_stripes: usize = 0;
    for (0..n_members) |m| {
        const rows: usize = rows_in[m];
        if (rows == 0) return error.InvalidArg;
        ctx.rows[m] = rows;
        ctx.stripes[m] = (rows + kern.tile_rows - 1) / kern.tile_rows;
        ctx.full[m] = kern.stripeBytes(tile_type, @min(kern.tile_rows, rows), cols);
        ctx.last[m] = kern.stripeBytes(tile_type, rows - (ctx.stripes[m] - 1) * kern.tile_rows, cols);
        ctx.y_off[m] = total_rows;
        total_rows = std.math.add(usize, total_rows, rows) catch return error.Overflow;
        expected += (ctx.stripes[m] - 1) * ctx.full[m] + ctx.last[m];
        max_stripes = @max(max_stripes, ctx.stripes[m]);
    }
    if (expected != length) return error.Length;
    try need(y_len, total_rows);
    if (tile_type == 3) {
        ctx.xf = try typed(f32, xf_raw);
        try need(xf_len, cols);
        ctx.xf_len = xf_len;
        ctx.xq = @ptrFromInt(@alignOf(abi.BlockQ8_0));
    } else {
        ctx.xq = try typed(abi.BlockQ8_0, xq_raw);
        const groups = (cols + qk - 1) / qk;
        try need(xq_len, try mul(groups, abi.q8_0_block_bytes));
        ctx.xq_len = groups;
        ctx.xf = @ptrFromInt(@alignOf(f32));
    }
    var err: i32 = 0;
    ctx.base = memory.rangePtr(handle, offset, length, &err) orelse return err;
    runPooled(.{ .run = TilesCtx.run, .ctx = &ctx, .items = max_stripes, .chunk = 1 });
    return ok();
}

const AttnCtx = struct {
    t: *const Table,
    kv_type: u32,
    q: [*]const f32,
    hd: usize,
    group: usize,
    k: *const anyopaque,
    v: *const anyopaque,
    stride: usize,
    first: usize,
    n_pos: usize,
    scale: f32,
    softcap: f32,
    scores: [*]f32,
    out: [*]f32,

    fn run(ctx: *const anyopaque, begin: usize, end: usize) void {
        const self: *const AttnCtx = @ptrCast(@alignCast(ctx));
        for (begin..end) |h| {
            const kvh = h / self.group;
            self.t.attention_head(self.kv_type, self.q + h * self.hd, self.hd, self.k, self.v, self.stride, kvh * self.hd, self.first, self.n_pos, self.scale, self.softcap, self.scores + h * self.n_pos, self.out + h * self.hd);
        }
    }
};

/// int32_t cf_attention(const float *q, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim,
///     const void *k_cache, const void *v_cache, uint32_t kv_type, size_t cache_len,
///     uint32_t first, uint32_t n_pos, float scale, float softcap,
///     float *scores, size_t scores_len, float *out, size_t out_len)
///
/// Grouped-query attention of one token over cache rows [first, n_pos):
/// rows are n_kv_heads * head_dim values (kv_type 1 = f32, 2 = f16); query
/// head h reads KV head h / (n_heads / n_kv_heads).
export fn cf_attention(q: ?*const anyopaque, n_heads: u32, n_kv_heads: u32, head_dim: u32, k_cache: ?*const anyopaque, v_cache: ?*const anyopaque, kv_type: u32, cache_len: usize, first: u32, n_pos: u32, scale: f32, softcap: f32, scores: ?*anyopaque, scores_len: usize, out: ?*anyopaque, out_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return attention(t, q, n_heads, n_kv_heads, head_dim, k_cache, v_cache, kv_type, cache_len, first, n_pos, scale, softcap, scores, scores_len, out, out_len) catch |e| statusOf(e);
}

fn attention(t: *const Table, q_raw: ?*const anyopaque, n_heads: u32, n_kv: u32, hd: u32, k_raw: ?*const anyopaque, v_raw: ?*const anyopaque, kv_type: u32, cache_len: usize, first: u32, n_pos: u32, scale: f32, softcap: f32, scores_raw: ?*anyopaque, scores_len: usize, out_raw: ?*anyopaque, out_len: usize) CheckError!i32 {
    if (n_heads == 0 or n_kv == 0 or hd == 0 or n_heads % n_kv != 0) return error.InvalidArg;
    if (kv_type != 1 and kv_type != 2) return error.InvalidArg;
    if (n_pos == 0 or first >= n_pos) return error.InvalidArg;
    if (!std.math.isFinite(scale) or !std.math.isFinite(softcap) or softcap < 0) return error.InvalidArg;
    const stride = try mul(n_kv, hd);
    try need(cache_len, try mul(n_pos, stride));
    try need(scores_len, try mul(n_heads, n_pos));
    try need(out_len, try mul(n_heads, hd));
    const q = try typed(f32, q_raw);
    if (kv_type == 1) {
        _ = try typed(f32, k_raw);
        _ = try typed(f32, v_raw);
    } else {
        _ = try typed(f16, k_raw);
        _ = try typed(f16, v_raw);
    }
    var ctx = AttnCtx{
        .t = t,
        .kv_type = kv_type,
        .q = q,
        .hd = hd,
        .group = n_heads / n_kv,
        .k = k_raw.?,
        .v = v_raw.?,
        .stride = stride,
        .first = first,
        .n_pos = n_pos,
        .scale = scale,
        .softcap = softcap,
        .scores = try typedMut(f32, scores_raw),
        .out = try typedMut(f32, out_raw),
    };
    runPooled(.{ .run = AttnCtx.run, .ctx = &ctx, .items = n_heads, .chunk = 1 });
    return ok();
}

// ---------------------------------------------------------------------------
// Plans: a forward pass per call (plan.zig)
// ---------------------------------------------------------------------------

fn words(p: ?*const anyopaque, n: usize) CheckError![]const u32 {
    const w = try typed(u32, p);
    return w[0..n];
}

/// int32_t cf_plan_create(int32_t workspace, const uint32_t *ops, size_t ops_words,
///     const uint32_t *runs, size_t runs_words, uint32_t max_tokens, uint32_t context,
///     uint32_t where[2])
///
/// Checks and stores a plan (see plan.zig for the encoding); returns its
/// handle (> 0) or a status code, with `where` naming the refused run
/// ({1, index}) or operation ({2, index}). Pins the workspace and every
/// run's region.
export fn cf_plan_create(workspace: i32, ops: ?*const anyopaque, ops_words: usize, runs: ?*const anyopaque, runs_words: usize, max_tokens: u32, context: u32, where_raw: ?*anyopaque) i32 {
    const where: *[2]u32 = @ptrCast(typedMut(u32, where_raw) catch |e| return statusOf(e));
    if (ops_words == 0 or ops_words > plan.max_ops * plan.op_words) return Status.invalid_arg.code();
    if (runs_words > plan.max_runs * plan.run_words) return Status.invalid_arg.code();
    const o = words(ops, ops_words) catch |e| return statusOf(e);
    const r: []const u32 = if (runs_words == 0) &.{} else words(runs, runs_words) catch |e| return statusOf(e);
    return plan.create(workspace, o, r, max_tokens, context, where);
}

/// int32_t cf_plan_run(int32_t plan, const uint32_t *tokens, size_t n_tokens, uint32_t pos,
///     uint32_t single_thread)
///
/// Runs the plan for tokens at positions [pos, pos + n_tokens), on the pool,
/// or on the calling thread alone when single_thread is 1 (where one thread
/// decodes faster than the pool: results are identical either way).
export fn cf_plan_run(handle: i32, tokens: ?*const anyopaque, n_tokens: usize, pos: u32, single_thread: u32) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n_tokens == 0 or n_tokens > plan.max_batch) return Status.invalid_arg.code();
    if (single_thread > 1) return Status.invalid_arg.code();
    const toks = words(tokens, n_tokens) catch |e| return statusOf(e);
    if (single_thread == 1) return plan.run(.{ .t = t, .run = &runInline }, handle, toks, pos);
    return plan.run(.{ .t = t, .run = &runPooled, .threads = pool.threads() }, handle, toks, pos);
}

/// int32_t cf_plan_run_ops(int32_t plan, const uint32_t *tokens, size_t n_tokens, uint32_t pos,
///     uint32_t first, uint32_t last)
///
/// Runs operations [first, last) of the plan (last is clamped to the plan's
/// operation count) on the pool; a profiler times consecutive ranges.
export fn cf_plan_run_ops(handle: i32, tokens: ?*const anyopaque, n_tokens: usize, pos: u32, first: u32, last: u32) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n_tokens == 0 or n_tokens > plan.max_batch) return Status.invalid_arg.code();
    const toks = words(tokens, n_tokens) catch |e| return statusOf(e);
    return plan.runOps(.{ .t = t, .run = &runPooled, .threads = pool.threads() }, handle, toks, pos, first, last);
}

/// int32_t cf_plan_run_rows(int32_t plan, const uint32_t *tokens, size_t n_tokens,
///     const uint32_t *bases, const uint32_t *positions, uint32_t first, uint32_t last)
///
/// Runs operations [first, last) of the plan on the pool for rows that each
/// carry a KV base and a position (several sequences in one batch, each in
/// its own range of the KV cache): row t stores at cache index bases[t] +
/// positions[t] and attends over [bases[t], bases[t] + positions[t]].
/// `range` when an index is outside the context, `invalid_arg` when two
/// rows share one.
export fn cf_plan_run_rows(handle: i32, tokens: ?*const anyopaque, n_tokens: usize, bases: ?*const anyopaque, positions: ?*const anyopaque, first: u32, last: u32) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n_tokens == 0 or n_tokens > plan.max_batch) return Status.invalid_arg.code();
    const toks = words(tokens, n_tokens) catch |e| return statusOf(e);
    const bs = words(bases, n_tokens) catch |e| return statusOf(e);
    const ps = words(positions, n_tokens) catch |e| return statusOf(e);
    return plan.runRows(.{ .t = t, .run = &runPooled, .threads = pool.threads() }, handle, toks, bs, ps, first, last);
}

fn runInline(job: pool_mod.Job) void {
    if (job.items > 0) job.run(job.ctx, 0, job.items);
}

/// int32_t cf_plan_cancel(int32_t plan, uint32_t value)
///
/// Sets (1) or clears (0) the plan's cancel flag; callable while the plan
/// runs on another thread (a nonblocking FFI call), which then returns
/// `cancelled` (-15) before its next operation.
export fn cf_plan_cancel(handle: i32, value: u32) i32 {
    return plan.setCancel(handle, value);
}

/// int32_t cf_plan_destroy(int32_t plan)
export fn cf_plan_destroy(handle: i32) i32 {
    return plan.destroy(handle);
}

/// int32_t cf_pack(const uint32_t *run, size_t run_words, int32_t dst, size_t dst_offset,
///     size_t dst_len, uint32_t evict)
///
/// Packs a tiled Q4_0/Q8_0 run (one run descriptor, plan.zig) into 16-row
/// panels (packing.zig) at [dst_offset, dst_offset + dst_len) of an
/// allocation; evict = 1 drops the source pages as they are packed.
export fn cf_pack(run: ?*const anyopaque, run_words: usize, dst: i32, dst_offset: usize, dst_len: usize, evict: u32) i32 {
    if (evict > 1) return Status.invalid_arg.code();
    const t = table() orelse return Status.not_initialized.code();
    if (run_words != plan.run_words) return Status.invalid_arg.code();
    const r = words(run, run_words) catch |e| return statusOf(e);
    return plan.pack(.{ .t = t, .run = &runPooled }, r, dst, dst_offset, dst_len, evict == 1);
}

/// int32_t cf_write(int32_t handle, size_t offset, const uint8_t *src, size_t len):
/// copies len bytes into an allocation.
export fn cf_write(handle: i32, offset: usize, src: ?[*]const u8, len: usize) i32 {
    if (len == 0) return ok();
    const s = src orelse return Status.invalid_arg.code();
    return memory.copyIn(handle, offset, s[0..len]);
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

/// int32_t cf_map_file(const uint8_t *path, size_t path_len, uint64_t out[2]):
/// maps a regular file read-only; writes {address, length}; returns a handle.
export fn cf_map_file(path: ?[*]const u8, path_len: usize, out: ?*anyopaque) i32 {
    const p = path orelse return Status.invalid_arg.code();
    const o = typedMut(u64, out) catch |e| return statusOf(e);
    if (path_len > memory.max_path_bytes) return Status.invalid_arg.code();
    var v: memory.View = undefined;
    const h = memory.mapFile(p[0..path_len], &v);
    if (h > 0) {
        o[0] = v.ptr;
        o[1] = v.len;
    }
    return h;
}

/// int32_t cf_map_alloc(size_t len, uint64_t out[2]): wasm32 build only. A
/// zeroed read-only region of len bytes (kind "map") that the host fills
/// with a file's bytes before using the handle: the wasm stand-in for
/// cf_map_file (memory_wasm.zig).
fn cfMapAlloc(len: usize, out: ?*anyopaque) callconv(.c) i32 {
    const o = typedMut(u64, out) catch |e| return statusOf(e);
    var v: memory.View = undefined;
    const h = memory.mapAlloc(len, &v);
    if (h > 0) {
        o[0] = v.ptr;
        o[1] = v.len;
    }
    return h;
}

/// size_t cf_scratch(size_t len): wasm32 build only. The address of a
/// 16-byte aligned area of at least len bytes that the host copies buffer
/// arguments through (grown on demand, never shrunk); 0 when memory is out.
fn cfScratch(len: usize) callconv(.c) usize {
    const S = struct {
        var area: []align(16) u8 = &.{};
    };
    if (len > S.area.len) {
        const want = @max(len, 1 << 20);
        const fresh = std.heap.wasm_allocator.alignedAlloc(u8, 16, want) catch return 0;
        if (S.area.len > 0) std.heap.wasm_allocator.free(S.area);
        S.area = fresh;
    }
    return @intFromPtr(S.area.ptr);
}

comptime {
    if (is_wasm) {
        @export(&cfMapAlloc, .{ .name = "cf_map_alloc" });
        @export(&cfScratch, .{ .name = "cf_scratch" });
    }
}

/// int32_t cf_alloc(size_t len, size_t alignment, uint64_t out[2]): zeroed,
/// aligned anonymous memory; writes {address, length}; returns a handle.
export fn cf_alloc(len: usize, alignment: usize, out: ?*anyopaque) i32 {
    const o = typedMut(u64, out) catch |e| return statusOf(e);
    var v: memory.View = undefined;
    const h = memory.alloc(len, alignment, &v);
    if (h > 0) {
        o[0] = v.ptr;
        o[1] = v.len;
    }
    return h;
}

/// int32_t cf_release(int32_t handle): unmaps or frees.
export fn cf_release(handle: i32) i32 {
    return memory.release(handle);
}

/// int32_t cf_madvise(int32_t handle, size_t offset, size_t len, uint32_t advice)
export fn cf_madvise(handle: i32, offset: usize, len: usize, advice: u32) i32 {
    return memory.advise(handle, offset, len, advice);
}

/// int32_t cf_copy(int32_t handle, size_t offset, uint8_t *dst, size_t len):
/// copies len bytes of a region from offset into dst, after bounds checks.
export fn cf_copy(handle: i32, offset: usize, dst: ?[*]u8, len: usize) i32 {
    if (len == 0) return memory.copyOut(handle, offset, &[_]u8{});
    const d = dst orelse return Status.invalid_arg.code();
    return memory.copyOut(handle, offset, d[0..len]);
}

// ---------------------------------------------------------------------------
// Direct reads and staging (io.zig; docs/KERNELS.md)
// ---------------------------------------------------------------------------

fn unsupported() i32 {
    return Status.unsupported.code();
}

/// int32_t cf_io_open(const uint8_t *path, size_t path_len, uint64_t out_info[4]):
/// opens a regular file for direct reads; writes {size, alignment, flags
/// (bit 0: O_DIRECT), reason (why not direct: 0 none, 1 O_DIRECT refused,
/// 2 no direct-I/O alignment reported, 3 alignment too large)}; returns a
/// handle (> 0) or a status code.
export fn cf_io_open(path: ?[*]const u8, path_len: usize, out_info: ?*anyopaque) i32 {
    if (is_wasm) {
        return unsupported();
    } else {
        const p = path orelse return Status.invalid_arg.code();
        const o = typedMut(u64, out_info) catch |e| return statusOf(e);
        if (path_len > io.max_path_bytes) return Status.invalid_arg.code();
        var info: io.Info = undefined;
        const h = io.openFile(p[0..path_len], &info);
        if (h > 0) o[0..4].* = .{ info.size, info.alignment, info.flags, info.reason };
        return h;
    }
}

/// int32_t cf_io_close(int32_t file): busy (-13) while a stage reads it.
export fn cf_io_close(handle: i32) i32 {
    if (is_wasm) return unsupported() else return io.closeFile(handle);
}

/// int32_t cf_stage_create(int32_t file, size_t slot_bytes, uint32_t n_slots, uint64_t out[4]):
/// a staging area of n_slots slots; writes {slot_bytes (rounded up), n_slots,
/// alignment, flags}; returns a handle (> 0) or a status code.
export fn cf_stage_create(file: i32, slot_bytes: usize, n_slots: u32, out: ?*anyopaque) i32 {
    if (is_wasm) {
        return unsupported();
    } else {
        const o = typedMut(u64, out) catch |e| return statusOf(e);
        var info: io.StageInfo = undefined;
        const h = io.createStage(file, slot_bytes, n_slots, &info);
        if (h > 0) o[0..4].* = .{ info.slot_bytes, info.n_slots, info.alignment, info.flags };
        return h;
    }
}

/// int32_t cf_stage_destroy(int32_t stage): busy while a plan or a slot pin
/// holds it; otherwise waits for the reads in flight and frees the slots.
export fn cf_stage_destroy(handle: i32) i32 {
    if (is_wasm) return unsupported() else return io.destroyStage(handle);
}

/// int32_t cf_stage_fetch(int32_t stage, uint32_t layer, uint32_t expert,
///     uint64_t file_offset, size_t length, uint32_t out[2]):
/// pins (layer, expert) in a slot, starting its read on a miss; writes
/// {slot, hit (1) or miss (0)}. Pair with cf_stage_release.
export fn cf_stage_fetch(stage: i32, layer: u32, expert: u32, file_offset: u64, length: usize, out: ?*anyopaque) i32 {
    if (is_wasm) {
        return unsupported();
    } else {
        const o = typedMut(u32, out) catch |e| return statusOf(e);
        var slot: io.Slot = undefined;
        io.acquire(stage, layer, expert, file_offset, length, &slot) catch |e| return io.statusOf(e);
        o[0..2].* = .{ slot.index, @intFromBool(slot.hit) };
        return ok();
    }
}

/// int32_t cf_stage_wait(int32_t stage, uint32_t slot): blocks until the
/// pinned slot's read completes; 0 or the read's status (changed, range,
/// an I/O status).
export fn cf_stage_wait(stage: i32, slot: u32) i32 {
    if (is_wasm) return unsupported() else return io.readStatus(stage, slot);
}

/// int32_t cf_stage_copy(int32_t stage, uint32_t slot, size_t offset, uint8_t *dst, size_t len):
/// copies [offset, offset + len) of the expert a pinned, completed slot holds.
export fn cf_stage_copy(stage: i32, slot: u32, offset: usize, dst: ?[*]u8, len: usize) i32 {
    if (is_wasm) {
        return unsupported();
    } else {
        if (len == 0) return io.copyOut(stage, slot, offset, &[_]u8{});
        const d = dst orelse return Status.invalid_arg.code();
        return io.copyOut(stage, slot, offset, d[0..len]);
    }
}

/// int32_t cf_stage_release(int32_t stage, uint32_t slot): undoes one fetch.
export fn cf_stage_release(stage: i32, slot: u32) i32 {
    if (is_wasm) return unsupported() else return io.releaseChecked(stage, slot);
}

/// int32_t cf_stage_stats(int32_t stage, uint64_t out[4]): {hits, misses,
/// bytes read, nanoseconds blocked in waits}.
export fn cf_stage_stats(stage: i32, out: ?*anyopaque) i32 {
    if (is_wasm) {
        return unsupported();
    } else {
        const o = typedMut(u64, out) catch |e| return statusOf(e);
        return io.stats(stage, o[0..4]);
    }
}

/// int32_t cf_stage_reset_stats(int32_t stage)
export fn cf_stage_reset_stats(stage: i32) i32 {
    if (is_wasm) return unsupported() else return io.resetStats(stage);
}

test {
    _ = plan;
    _ = @import("plan_check.zig");
    _ = @import("plan_exec.zig");
    _ = @import("plan_rows.zig");
    _ = @import("plan_matmul.zig");
    _ = @import("plan_pack.zig");
    _ = abi;
    _ = cpu;
    _ = memory;
    _ = pool_mod;
    _ = @import("handles.zig");
    _ = @import("act_q8_k.zig");
    if (!is_wasm) _ = io;
    if (!is_wasm) _ = prefetch;
    if (!is_wasm) _ = proc_status;
}

test "exports validate before dispatching" {
    try std.testing.expectEqual(@as(i32, 0), cf_init(1, 2, 0) - 1);
    defer cf_shutdown();
    // Panel prefetch: auto follows the CPU, on and off are kept across cf_init.
    try std.testing.expectEqual(Status.invalid_arg.code(), cf_set_panel_prefetch(3));
    try std.testing.expectEqual(@as(i32, 1), cf_set_panel_prefetch(1));
    try std.testing.expectEqual(@as(i32, 0), cf_set_panel_prefetch(2));
    try std.testing.expectEqual(@as(i32, 1), cf_init(1, 2, 0));
    try std.testing.expectEqual(@as(i32, 0), cf_set_panel_prefetch(2));
    try std.testing.expectEqual(@as(i32, @intFromBool(cpu.panelPrefetchPays())), cf_set_panel_prefetch(0));
    var x: [64]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @floatFromInt(i);
    var q: [68]u8 = undefined;
    try std.testing.expectEqual(Status.ok.code(), cf_quantize_q8_0(&x, 64, &q, q.len));
    try std.testing.expectEqual(Status.length.code(), cf_quantize_q8_0(&x, 64, &q, q.len - 1));
    try std.testing.expectEqual(Status.length.code(), cf_quantize_q8_0(&x, 63, &q, q.len));
    try std.testing.expectEqual(Status.invalid_arg.code(), cf_quantize_q8_0(null, 64, &q, q.len));
    const misaligned: *const anyopaque = @ptrFromInt(@intFromPtr(&x) + 1);
    try std.testing.expectEqual(Status.alignment.code(), cf_quantize_q8_0(misaligned, 32, &q, q.len));
    var y: [3]f32 = undefined;
    try std.testing.expectEqual(Status.length.code(), cf_matvec_q8_0(&q, q.len, 2, 64, &q, q.len, &y, 3));
    try std.testing.expectEqual(Status.overflow.code(), cf_matvec_q8_0(&q, q.len, std.math.maxInt(usize), 64, &q, q.len, &y, 3));
    try std.testing.expectEqual(Status.ok.code(), cf_matvec_q8_0(&q, q.len, 1, 64, &q, q.len, &y, 3));
    try std.testing.expectEqual(Status.range.code(), cf_rope(&x, 64, 1, 64, 64, abi.rope_max_pos + 1, &x, 32, 1));
    try std.testing.expectEqual(Status.invalid_arg.code(), cf_rope(&x, 64, 1, 64, 63, 0, &x, 32, 1));
    try std.testing.expectEqual(Status.invalid_arg.code(), cf_init(9, 1, 0));
    try std.testing.expectEqual(Status.unsupported.code(), cf_init(3, 1, std.math.maxInt(u64)));
}
