/* proto.h — the front end <-> worker process messages, over a stream socketpair.
 *
 * A frame: u32 magic "MXS1", u32 type, u64 payload length, payload. Integers are the
 * host's (both ends are one machine). Payloads:
 *   READY  (worker)  JSON {"pid": .., "signature": {"inputs": [...], "outputs": [...]}}
 *   FAIL   (worker)  the message: initialisation failed (the process then exits)
 *   BATCH  (front)   u64 id, u32 n, then n x (u32 meta_len, u64 blob_len, meta, blob)
 *   RESULT (worker)  u64 id, u32 n, u32 flags (1: the handler raised on the batch, the
 *                    answers carry its error), then n x (u32 status, u32 ctype_len,
 *                    u64 body_len, ctype, body)
 *   ERROR  (worker)  u64 id, the message: the worker's own glue failed on the batch
 *   STOP   (front)   empty: finish and exit
 * A malformed frame from either side ends the conversation (the front end kills the
 * worker; the worker exits). */
#ifndef MXS_PROTO_H
#define MXS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define MXS_MAGIC 0x3153584du
enum { MXS_MSG_READY = 1, MXS_MSG_FAIL, MXS_MSG_BATCH, MXS_MSG_RESULT, MXS_MSG_ERROR, MXS_MSG_STOP };
/* No frame is larger (a batch of requests at their size limit fits). */
#define MXS_FRAME_MAX ((uint64_t)1 << 34)

typedef struct mxs_frame {
  uint32_t magic, type;
  uint64_t len;
} mxs_frame;

/* Writes all of p; 0 or -1 (errno). EINTR is retried. */
int mxs_write_all(int fd, const void *p, size_t n);
/* Reads exactly n bytes before deadline (monotonic seconds, <= 0: none): 0, -1 (EOF or
 * error), -2 (deadline). */
int mxs_read_all(int fd, void *p, size_t n, double deadline);
/* Reads a frame whose payload is at most max bytes into a new buffer (*payload, NUL
 * terminated, free()); same results, -3 for a malformed frame or one too large. */
int mxs_frame_read(int fd, mxs_frame *h, char **payload, uint64_t max, double deadline);
int mxs_frame_write(int fd, uint32_t type, const void *p, size_t n);

/* A cursor over a payload: every read checks the bytes left. */
typedef struct mxs_cur {
  const char *p;
  size_t n;
  int bad;
} mxs_cur;
uint32_t mxs_cur_u32(mxs_cur *c);
uint64_t mxs_cur_u64(mxs_cur *c);
const char *mxs_cur_bytes(mxs_cur *c, uint64_t n);

#endif
