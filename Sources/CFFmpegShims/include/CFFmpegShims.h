#ifndef TOURPACK_CFFMPEG_SHIMS_H
#define TOURPACK_CFFMPEG_SHIMS_H
#include <stddef.h>
#include <libavutil/error.h>
#include <libavutil/channel_layout.h>

// FFmpeg's libraries are loaded on first use (loader.c): 1 once they are,
// 0 when they cannot be (then every FFmpeg call fails, and
// tp_ffmpeg_load_error says why).
int tp_ffmpeg_load(void);
// Why FFmpeg's libraries could not be loaded; NULL once they are.
const char *tp_ffmpeg_load_error(void);
// LIBAVCODEC_VERSION_INT and LIBAVFORMAT_VERSION_INT of the headers tourpack
// was built with, which the loaded libraries are held to: known without
// loading them.
unsigned tp_avcodec_built_version(void);
unsigned tp_avformat_built_version(void);

// AVERROR(e) is a function-like macro; Swift imports no function-like macros.
int tp_averror(int posix_errno);
// AVERROR_EOF is built with FFERRTAG, a macro Swift cannot evaluate.
int tp_averror_eof(void);
// AVERROR(EAGAIN), the "send more input / drain output" signal of the codec API.
int tp_averror_eagain(void);
// AVERROR_ENCODER_NOT_FOUND is an FFERRTAG; thrown when libavcodec lacks an encoder we need.
int tp_averror_encoder_not_found(void);
// AVERROR_DECODER_NOT_FOUND is an FFERRTAG; reported when a file's codec cannot be decoded.
int tp_averror_decoder_not_found(void);
// AVERROR_STREAM_NOT_FOUND is an FFERRTAG; reported when a file has no audio stream.
int tp_averror_stream_not_found(void);
// AVERROR_OPTION_NOT_FOUND is an FFERRTAG; thrown when a codec or muxer ignores an option we set.
int tp_averror_option_not_found(void);
// AV_CHANNEL_LAYOUT_MONO is a compound-literal macro; Swift cannot import it.
void tp_channel_layout_mono(AVChannelLayout *layout);
// av_err2str is a macro over a stack buffer; this fills a caller buffer instead.
void tp_av_strerror(int errnum, char *buffer, size_t size);

// av_log's callback takes a va_list, which Swift cannot implement. These
// capture the error-level messages FFmpeg logs on the calling thread (a
// decoder conceals most damage and only logs it), and keep them off stderr,
// so an inspection can report them. Other threads' logging is unchanged.
void tp_log_capture_begin(void);
// Ends the capture on this thread; returns how many error messages were logged.
int tp_log_capture_end(void);
// The index-th captured message (up to 8 are kept), copied into buffer; 0 when absent.
int tp_log_captured_message(int index, char *buffer, size_t size);


#endif
