import TourpackKit

/// The embedded TTS endpoint (`tourpack serve-tts`), backed by libespeak-ng.
/// Built out in the TTS issue.
public enum TTSServerInfo {
    public static let defaultHost = "127.0.0.1"
}
