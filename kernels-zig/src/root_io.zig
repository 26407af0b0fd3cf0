//! The C ABI's direct reads and staging (root.zig; io.zig; docs/KERNELS.md,
//! "Direct reads and staging"): opening a file for O_DIRECT reads, and the
//! stages, LRU caches of expert slots read from it. Native only: the wasm32
//! build exports the same symbols, returning `unsupported`. Each validates
//! what it is given with root.zig's checks before calling io.zig.

const abi = @import("abi.zig");
const root = @import("root.zig");
/// Native only (root.zig's `io`): the wasm32 build never reaches it.
const io = if (root.is_wasm) struct {} else @import("io.zig");

const is_wasm = root.is_wasm;
const Status = abi.Status;
const ok = root.ok;
const statusOf = root.statusOf;
const typedMut = root.typedMut;

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
