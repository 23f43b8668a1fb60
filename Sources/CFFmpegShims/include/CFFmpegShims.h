#ifndef TOURPACK_CFFMPEG_SHIMS_H
#define TOURPACK_CFFMPEG_SHIMS_H
#include <libavutil/error.h>
#include <libavutil/channel_layout.h>

// AVERROR(e) is a function-like macro; Swift imports no function-like macros.
int tp_averror(int posix_errno);
// AVERROR_EOF is built with FFERRTAG, a macro Swift cannot evaluate.
int tp_averror_eof(void);
// AVERROR(EAGAIN), the "send more input / drain output" signal of the codec API.
int tp_averror_eagain(void);
// AV_CHANNEL_LAYOUT_MONO is a compound-literal macro; Swift cannot import it.
void tp_channel_layout_mono(AVChannelLayout *layout);
// av_err2str is a macro over a stack buffer; this fills a caller buffer instead.
void tp_av_strerror(int errnum, char *buffer, size_t size);

#endif
