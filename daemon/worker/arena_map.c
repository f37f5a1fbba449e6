/* SPDX-License-Identifier: MIT */
/*
 * The arena's physical side: arena.c places allocations in the session's
 * reserved range; the functions here back them with exportable chunks
 * (cuMemCreate/cuMemMap), or, in a hot restore, with the chunks the previous
 * worker exported. lupw_release_all() gives back the arena and every context
 * when the session ends.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "worker/arrays.h"
#include "worker/mapped.h"
#include "worker/precopy.h"
#include "worker/session.h"

/* Takes fd (an imported chunk's, or -1) on success only. */
static int chunk_add(struct lupw_session *s, uint64_t addr, uint64_t size, CUmemGenericAllocationHandle h, int fd,
                     int device)
{
        if (s->mem.n_chunks == s->mem.cap_chunks) {
                size_t ncap = s->mem.cap_chunks ? s->mem.cap_chunks * 2 : 64;
                struct lupw_chunk *n = realloc(s->mem.chunks, ncap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                s->mem.chunks = n;
                s->mem.cap_chunks = ncap;
        }
        s->mem.chunks[s->mem.n_chunks++] = (struct lupw_chunk){
                .addr = addr,
                .size = size,
                .handle = h,
                .origin = fd >= 0 ? LUPW_CHUNK_IMPORTED : LUPW_CHUNK_CREATED,
                .fd = fd,
                .device = device,
        };
        return 0;
}

int lupw_map_chunk(struct lupw_session *s, uint64_t addr, uint64_t size, const CUmemAllocationProp *prop,
                   CUmemGenericAllocationHandle *ret)
{
        const struct lupw_backend *be = &s->be.fn;
        int device = prop->location.id;
        CUmemAccessDesc access = {
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device },
                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        CUmemGenericAllocationHandle h;
        CUresult r;
        int fd = -1;
        /* a hot restore maps the memory the chunk had, from its fd */
        int hot = lupw_hot_import(s, addr, size, &h, &fd);

        if (hot < 0)
                return (int)CUDA_ERROR_INVALID_VALUE;
        r = hot ? CUDA_SUCCESS : be->cuMemCreate(&h, size, prop, 0);
        if (r != CUDA_SUCCESS)
                return (int)r;
        r = be->cuMemMap(addr, size, 0, h, 0);
        if (r != CUDA_SUCCESS)
                goto out_release;
        r = be->cuMemSetAccess(addr, size, &access, 1);
        if (r != CUDA_SUCCESS)
                goto out_unmap;
        if (chunk_add(s, addr, size, h, fd, device) < 0) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_unmap;
        }
        if (ret)
                *ret = h;
        return 0;

out_unmap:
        be->cuMemUnmap(addr, size);
out_release:
        be->cuMemRelease(h);
        if (hot) {
                close(fd);
                lupw_hot_unimport(s, addr, size);
        }
        return (int)r;
}

static int arena_map(void *ud, uint64_t addr, uint64_t size, int device)
{
        CUmemAllocationProp prop = {
                .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device },
                /* exportable, so a hot restart can hand the memory to the next worker */
                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        };
        return lupw_map_chunk(ud, addr, size, &prop, NULL);
}

static void arena_unmap(void *ud, uint64_t addr, uint64_t size)
{
        struct lupw_session *s = ud;
        for (size_t i = 0; i < s->mem.n_chunks; i++) {
                if (s->mem.chunks[i].addr == addr) {
                        /* a pre-copy may be reading it (worker/precopy.c) */
                        if (lupw_precopy_running(s))
                                lupw_precopy_cancel(s, "the client freed device memory");
                        s->be.fn.cuMemUnmap(addr, size);
                        s->be.fn.cuMemRelease(s->mem.chunks[i].handle);
                        if (s->mem.chunks[i].fd >= 0)
                                close(s->mem.chunks[i].fd);
                        s->mem.chunks[i] = s->mem.chunks[--s->mem.n_chunks];
                        return;
                }
        }
        lup_warn("session %s: unmap of unknown chunk 0x%llx", s->name, (unsigned long long)addr);
}

const struct arena_ops lupw_arena_ops = { .map = arena_map, .unmap = arena_unmap };

void lupw_unmap_chunk(struct lupw_session *s, uint64_t addr, uint64_t size)
{
        arena_unmap(s, addr, size);
}

int lupw_reserve_arena(struct lupw_session *s, uint32_t slot, char *err, size_t errlen)
{
        const struct lupw_backend *be = &s->be.fn;
        uint64_t want = lup_arena_slot_base(slot);
        CUdeviceptr got = 0;
        CUresult r = be->cuMemAddressReserve(&got, LUP_ARENA_SIZE, LUP_ARENA_GRANULE, want, 0);
        if (r != CUDA_SUCCESS || got != want) {
                if (r == CUDA_SUCCESS)
                        be->cuMemAddressFree(got, LUP_ARENA_SIZE);
                snprintf(err, errlen, "cannot reserve the session's device address range at 0x%llx (CUresult %d)",
                         (unsigned long long)want, (int)r);
                return -EADDRINUSE;
        }
        if (arena_init(&s->mem.arena, want, LUP_ARENA_SIZE, LUP_ARENA_GRANULE, &lupw_arena_ops, s) < 0) {
                be->cuMemAddressFree(want, LUP_ARENA_SIZE);
                snprintf(err, errlen, "out of memory in the worker");
                return -ENOMEM;
        }
        s->slot = slot;
        s->mem.reserved = true;
        return 0;
}

void lupw_unreserve_arena(struct lupw_session *s)
{
        if (!s->mem.reserved)
                return;
        arena_destroy(&s->mem.arena);
        s->be.fn.cuMemAddressFree(lup_arena_slot_base(s->slot), LUP_ARENA_SIZE);
        s->mem.reserved = false;
}

void lupw_release_all(struct lupw_session *s)
{
        if (!s->be.dl)
                return;
        for (int i = 0; i < s->n_devices; i++)
                if (s->ctx.primary[i])
                        s->be.fn.cuCtxSetCurrent(s->ctx.primary[i]), s->be.fn.cuCtxSynchronize();
        lupw_mapped_release(s); /* mapped host memory (worker/mapped.c) */
        lupw_arrays_release(s); /* arrays and objects go with the contexts (worker/arrays.c) */
        lupw_unreserve_arena(s);
        for (int i = 0; i < s->ctx.n_slots; i++)
                s->be.fn.cuCtxDestroy_v2(s->ctx.slots[i].real);
        s->ctx.n_slots = 0;
        for (int i = 0; i < s->n_devices; i++) {
                if (s->ctx.primary[i])
                        s->be.fn.cuDevicePrimaryCtxRelease_v2(i);
                s->ctx.primary[i] = NULL;
        }
        free(s->mem.chunks);
        s->mem.chunks = NULL;
        s->mem.n_chunks = s->mem.cap_chunks = 0;
}
