// FFmpeg's libraries, loaded on first use rather than when tourpack starts.
//
// libavformat and libavcodec bring about 110 shared libraries with them
// (codecs, network protocols, hardware interfaces); mapping and relocating
// them took about 30 ms of every start, more than half of `tourpack --help`,
// while most commands (a warm rebuild, publish, install, validate of a
// package.json) encode and decode nothing.
//
// So nothing links FFmpeg. Every FFmpeg function tourpack calls is defined
// here, with the header's own prototype, as a small function of the same
// name that calls the real one through a pointer, which the first call
// looks up with dlopen and dlsym (by the soname of the major version the
// headers are). The definitions are hidden: they bind tourpack's own calls
// at link time and are never exported, so they cannot interpose on
// FFmpeg's calls between its own libraries.
//
// A call to an FFmpeg function missing from this list fails to link
// ("undefined reference"): add it to TP_FFMPEG_FUNCTIONS below.
//
// When the libraries cannot be loaded, every function answers as it does
// for a failure (AVERROR(ENOSYS), NULL, nothing), and tp_ffmpeg_load_error
// says why; FFmpegError's description adds it.

// The C library first, so its functions keep their default visibility
// (the headers below include these again, to no effect).
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#pragma GCC visibility push(hidden)
#include <libavformat/avformat.h>
#include <libavformat/avio.h>
#include <libavcodec/avcodec.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/mathematics.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>
#pragma GCC visibility pop

#include "CFFmpegShims.h"

// (library, return type, name, parameters, arguments, answer when FFmpeg is not there)
#define TP_FAIL_INT AVERROR(ENOSYS)
#define TP_FFMPEG_FUNCTIONS(F)                                                                                                  \
    F(avutil, AVAudioFifo *, av_audio_fifo_alloc, (enum AVSampleFormat sample_fmt, int channels, int nb_samples),             \
      (sample_fmt, channels, nb_samples), NULL)                                                                                 \
    F(avutil, void, av_audio_fifo_free, (AVAudioFifo * af), (af), )                                                            \
    F(avutil, int, av_audio_fifo_read, (AVAudioFifo * af, void **data, int nb_samples), (af, data, nb_samples), TP_FAIL_INT)   \
    F(avutil, int, av_audio_fifo_size, (AVAudioFifo * af), (af), 0)                                                            \
    F(avutil, int, av_audio_fifo_write, (AVAudioFifo * af, void **data, int nb_samples), (af, data, nb_samples), TP_FAIL_INT)  \
    F(avutil, int, av_dict_count, (const AVDictionary *m), (m), 0)                                                             \
    F(avutil, void, av_dict_free, (AVDictionary * *m), (m), )                                                                  \
    F(avutil, AVDictionaryEntry *, av_dict_get,                                                                                \
      (const AVDictionary *m, const char *key, const AVDictionaryEntry *prev, int flags), (m, key, prev, flags), NULL)          \
    F(avutil, int, av_dict_set, (AVDictionary * *pm, const char *key, const char *value, int flags), (pm, key, value, flags),  \
      TP_FAIL_INT)                                                                                                              \
    F(avformat, int, av_find_best_stream,                                                                                      \
      (AVFormatContext * ic, enum AVMediaType type, int wanted_stream_nb, int related_stream, const AVCodec **decoder_ret,     \
       int flags),                                                                                                              \
      (ic, type, wanted_stream_nb, related_stream, decoder_ret, flags), TP_FAIL_INT)                                            \
    F(avutil, AVFrame *, av_frame_alloc, (void), (), NULL)                                                                     \
    F(avutil, void, av_frame_free, (AVFrame * *frame), (frame), )                                                              \
    F(avutil, int, av_frame_get_buffer, (AVFrame * frame, int align), (frame, align), TP_FAIL_INT)                            \
    F(avutil, void, av_frame_unref, (AVFrame * frame), (frame), )                                                              \
    F(avcodec, int, av_get_audio_frame_duration2, (AVCodecParameters * par, int frame_bytes), (par, frame_bytes), 0)          \
    F(avutil, int, av_get_bytes_per_sample, (enum AVSampleFormat sample_fmt), (sample_fmt), 0)                                 \
    F(avutil, const char *, av_get_sample_fmt_name, (enum AVSampleFormat sample_fmt), (sample_fmt), NULL)                     \
    F(avformat, int, av_interleaved_write_frame, (AVFormatContext * s, AVPacket * pkt), (s, pkt), TP_FAIL_INT)                \
    F(avutil, int, av_log_format_line2,                                                                                        \
      (void *ptr, int level, const char *fmt, va_list vl, char *line, int line_size, int *print_prefix),                       \
      (ptr, level, fmt, vl, line, line_size, print_prefix), TP_FAIL_INT)                                                        \
    F(avutil, void, av_log_set_callback, (void (*callback)(void *, int, const char *, va_list)), (callback), )                 \
    F(avcodec, AVPacket *, av_packet_alloc, (void), (), NULL)                                                                  \
    F(avcodec, void, av_packet_free, (AVPacket * *pkt), (pkt), )                                                               \
    F(avcodec, uint8_t *, av_packet_get_side_data, (const AVPacket *pkt, enum AVPacketSideDataType type, size_t *size),       \
      (pkt, type, size), NULL)                                                                                                  \
    F(avcodec, void, av_packet_rescale_ts, (AVPacket * pkt, AVRational tb_src, AVRational tb_dst), (pkt, tb_src, tb_dst), )    \
    F(avcodec, void, av_packet_unref, (AVPacket * pkt), (pkt), )                                                               \
    F(avformat, int, av_read_frame, (AVFormatContext * s, AVPacket * pkt), (s, pkt), TP_FAIL_INT)                             \
    F(avutil, int64_t, av_rescale_q, (int64_t a, AVRational bq, AVRational cq), (a, bq, cq), 0)                                \
    F(avutil, int, av_samples_set_silence,                                                                                     \
      (uint8_t * *audio_data, int offset, int nb_samples, int nb_channels, enum AVSampleFormat sample_fmt),                    \
      (audio_data, offset, nb_samples, nb_channels, sample_fmt), TP_FAIL_INT)                                                   \
    F(avutil, int, av_strerror, (int errnum, char *errbuf, size_t errbuf_size), (errnum, errbuf, errbuf_size), TP_FAIL_INT)   \
    F(avformat, int, av_write_trailer, (AVFormatContext * s), (s), TP_FAIL_INT)                                                \
    F(avcodec, AVCodecContext *, avcodec_alloc_context3, (const AVCodec *codec), (codec), NULL)                               \
    F(avcodec, const AVCodec *, avcodec_find_decoder, (enum AVCodecID id), (id), NULL)                                         \
    F(avcodec, const AVCodec *, avcodec_find_encoder, (enum AVCodecID id), (id), NULL)                                         \
    F(avcodec, const AVCodec *, avcodec_find_encoder_by_name, (const char *name), (name), NULL)                                \
    F(avcodec, void, avcodec_free_context, (AVCodecContext * *avctx), (avctx), )                                               \
    F(avcodec, const char *, avcodec_get_name, (enum AVCodecID id), (id), "unknown_codec")                                     \
    F(avcodec, int, avcodec_open2, (AVCodecContext * avctx, const AVCodec *codec, AVDictionary **options),                    \
      (avctx, codec, options), TP_FAIL_INT)                                                                                     \
    F(avcodec, int, avcodec_parameters_from_context, (AVCodecParameters * par, const AVCodecContext *codec), (par, codec),     \
      TP_FAIL_INT)                                                                                                              \
    F(avcodec, int, avcodec_parameters_to_context, (AVCodecContext * codec, const AVCodecParameters *par), (codec, par),      \
      TP_FAIL_INT)                                                                                                              \
    F(avcodec, int, avcodec_receive_frame, (AVCodecContext * avctx, AVFrame * frame), (avctx, frame), TP_FAIL_INT)            \
    F(avcodec, int, avcodec_receive_packet, (AVCodecContext * avctx, AVPacket * avpkt), (avctx, avpkt), TP_FAIL_INT)          \
    F(avcodec, int, avcodec_send_frame, (AVCodecContext * avctx, const AVFrame *frame), (avctx, frame), TP_FAIL_INT)          \
    F(avcodec, int, avcodec_send_packet, (AVCodecContext * avctx, const AVPacket *avpkt), (avctx, avpkt), TP_FAIL_INT)        \
    F(avcodec, unsigned, avcodec_version, (void), (), 0)                                                                       \
    F(avformat, int, avformat_alloc_output_context2,                                                                           \
      (AVFormatContext * *ctx, const AVOutputFormat *oformat, const char *format_name, const char *filename),                  \
      (ctx, oformat, format_name, filename), TP_FAIL_INT)                                                                       \
    F(avformat, void, avformat_close_input, (AVFormatContext * *s), (s), )                                                     \
    F(avformat, int, avformat_find_stream_info, (AVFormatContext * ic, AVDictionary **options), (ic, options), TP_FAIL_INT)   \
    F(avformat, void, avformat_free_context, (AVFormatContext * s), (s), )                                                     \
    F(avformat, AVStream *, avformat_new_stream, (AVFormatContext * s, const AVCodec *c), (s, c), NULL)                       \
    F(avformat, int, avformat_open_input,                                                                                      \
      (AVFormatContext * *ps, const char *url, const AVInputFormat *fmt, AVDictionary **options), (ps, url, fmt, options),     \
      TP_FAIL_INT)                                                                                                              \
    F(avformat, unsigned, avformat_version, (void), (), 0)                                                                     \
    F(avformat, int, avformat_write_header, (AVFormatContext * s, AVDictionary **options), (s, options), TP_FAIL_INT)         \
    F(avformat, int, avio_closep, (AVIOContext * *s), (s), TP_FAIL_INT)                                                        \
    F(avformat, int, avio_open, (AVIOContext * *s, const char *url, int flags), (s, url, flags), TP_FAIL_INT)                 \
    F(swresample, int, swr_alloc_set_opts2,                                                                                    \
      (struct SwrContext * *ps, AVChannelLayout * out_ch_layout, enum AVSampleFormat out_sample_fmt, int out_sample_rate,      \
       AVChannelLayout *in_ch_layout, enum AVSampleFormat in_sample_fmt, int in_sample_rate, int log_offset, void *log_ctx),   \
      (ps, out_ch_layout, out_sample_fmt, out_sample_rate, in_ch_layout, in_sample_fmt, in_sample_rate, log_offset, log_ctx),  \
      TP_FAIL_INT)                                                                                                              \
    F(swresample, int, swr_convert, (struct SwrContext * s, uint8_t **out, int out_count, const uint8_t **in, int in_count),  \
      (s, out, out_count, in, in_count), TP_FAIL_INT)                                                                           \
    F(swresample, void, swr_free, (struct SwrContext * *s), (s), )                                                             \
    F(swresample, int, swr_get_out_samples, (struct SwrContext * s, int in_samples), (s, in_samples), TP_FAIL_INT)            \
    F(swresample, int, swr_init, (struct SwrContext * s), (s), TP_FAIL_INT)

#define TP_STRINGIFY2(x) #x
#define TP_STRINGIFY(x) TP_STRINGIFY2(x)

enum tp_library { tp_avutil, tp_swresample, tp_avcodec, tp_avformat, tp_library_count };
static const char *const tp_sonames[tp_library_count] = {
    "libavutil.so." TP_STRINGIFY(LIBAVUTIL_VERSION_MAJOR),
    "libswresample.so." TP_STRINGIFY(LIBSWRESAMPLE_VERSION_MAJOR),
    "libavcodec.so." TP_STRINGIFY(LIBAVCODEC_VERSION_MAJOR),
    "libavformat.so." TP_STRINGIFY(LIBAVFORMAT_VERSION_MAJOR),
};

// The real functions, once loaded.
static struct {
#define TP_POINTER(library, type, name, parameters, arguments, failure) __typeof__(&name) name;
    TP_FFMPEG_FUNCTIONS(TP_POINTER)
#undef TP_POINTER
} tp_real;

static pthread_once_t tp_load_once = PTHREAD_ONCE_INIT;
static int tp_loaded;
static char tp_error[512];

void tp_log_install_loaded(void (*set_callback)(void (*)(void *, int, const char *, va_list)));

static void tp_load(void) {
    void *handles[tp_library_count];
    for (int library = 0; library < tp_library_count; library++) {
        // RTLD_LOCAL: FFmpeg's symbols stay out of the process's global scope.
        handles[library] = dlopen(tp_sonames[library], RTLD_LAZY | RTLD_LOCAL);
        if (!handles[library]) {
            const char *reason = dlerror();
            snprintf(tp_error, sizeof tp_error, "%s", reason ? reason : tp_sonames[library]);
            return;
        }
    }
#define TP_RESOLVE(library, type, name, parameters, arguments, failure)                                                        \
    tp_real.name = (__typeof__(&name))dlsym(handles[tp_##library], #name);                                                     \
    if (!tp_real.name) {                                                                                                        \
        snprintf(tp_error, sizeof tp_error, "%s has no %s", tp_sonames[tp_##library], #name);                                  \
        return;                                                                                                                 \
    }
    TP_FFMPEG_FUNCTIONS(TP_RESOLVE)
#undef TP_RESOLVE
    // The encoder's fingerprint (and so every output-cache key) names the
    // versions the headers are; another library would encode differently
    // under the same name.
    unsigned codec = tp_real.avcodec_version(), format = tp_real.avformat_version();
    if (codec != LIBAVCODEC_VERSION_INT || format != LIBAVFORMAT_VERSION_INT) {
        snprintf(
            tp_error, sizeof tp_error,
            "libavcodec %u.%u.%u and libavformat %u.%u.%u are installed, but tourpack was built with %u.%u.%u and %u.%u.%u: "
            "build tourpack again (make build)",
            codec >> 16, (codec >> 8) & 0xff, codec & 0xff, format >> 16, (format >> 8) & 0xff, format & 0xff,
            LIBAVCODEC_VERSION_MAJOR, LIBAVCODEC_VERSION_MINOR, LIBAVCODEC_VERSION_MICRO, LIBAVFORMAT_VERSION_MAJOR,
            LIBAVFORMAT_VERSION_MINOR, LIBAVFORMAT_VERSION_MICRO);
        return;
    }
    tp_log_install_loaded(tp_real.av_log_set_callback);
    tp_loaded = 1;
}

int tp_ffmpeg_load(void) {
    pthread_once(&tp_load_once, tp_load);
    return tp_loaded;
}

const char *tp_ffmpeg_load_error(void) {
    pthread_once(&tp_load_once, tp_load);
    return tp_loaded ? NULL : tp_error;
}

unsigned tp_avcodec_built_version(void) { return LIBAVCODEC_VERSION_INT; }
unsigned tp_avformat_built_version(void) { return LIBAVFORMAT_VERSION_INT; }

#define TP_TRAMPOLINE(library, type, name, parameters, arguments, failure)                                                     \
    type name parameters {                                                                                                      \
        if (!tp_ffmpeg_load()) return failure;                                                                                  \
        return tp_real.name arguments;                                                                                          \
    }
TP_FFMPEG_FUNCTIONS(TP_TRAMPOLINE)
#undef TP_TRAMPOLINE
