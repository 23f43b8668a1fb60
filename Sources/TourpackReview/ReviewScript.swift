/// `assets/review.js`: draws a tour page's map with Leaflet from the JSON
/// the page carries in `<script id="tour-data">`. Tiles come only from the
/// package's pack: a tile the pack does not hold is a blank data URI, never
/// a request, so the map shows exactly what the device has offline.
/// When the map is drawn it sets `data-map-ready` on the body (tests wait for it).
///
/// On a POI page it shows each player's current caption: the `<track>` is
/// put in `hidden` mode (loaded and timed, but not drawn by the browser,
/// which draws nothing for audio anyway) and every `cuechange` writes the
/// active cues' text into the player's `.caption-cue`, as `textContent`:
/// WebVTT's own markup and entities are parsed by the browser
/// (`getCueAsHTML`), and only their text reaches the page.
enum ReviewScript {
    static let javascript = #"""
        // tourpack review: each player's current caption, read along as it plays.
        (function () {
          "use strict";
          document.querySelectorAll("audio").forEach(function (audio) {
            var line = audio.parentNode.querySelector(".caption-cue");
            if (!line || !audio.textTracks || audio.textTracks.length === 0) { return; }
            var track = audio.textTracks[0];
            track.mode = "hidden";
            var show = function () {
              var text = [];
              var active = track.activeCues || [];
              for (var i = 0; i < active.length; i++) {
                text.push(active[i].getCueAsHTML ? active[i].getCueAsHTML().textContent : active[i].text);
              }
              line.textContent = text.join(" ");
            };
            track.addEventListener("cuechange", show);
            show();
          });
        })();

        // tourpack review: a tour's map, drawn from the data its page carries.
        (function () {
          "use strict";
          var blank = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";
          var element = document.getElementById("tour-data");
          if (!element) { return; }
          var tour = JSON.parse(element.textContent);
          var coverage = L.latLngBounds(tour.coverage);
          var options = { zoomSnap: 1, attributionControl: true };
          if (tour.tiles) {
            options.minZoom = tour.tiles.minZoom;
            options.maxZoom = tour.tiles.maxZoom;
          }
          var map = L.map("map", options);
          map.attributionControl.setPrefix("Leaflet");
          if (tour.tiles) {
            var present = new Set(tour.tiles.present);
            var PackLayer = L.TileLayer.extend({
              getTileUrl: function (coords) {
                var key = coords.z + "/" + coords.x + "/" + coords.y;
                return present.has(key) ? L.TileLayer.prototype.getTileUrl.call(this, coords) : blank;
              }
            });
            var escaped = String(tour.tiles.attribution || "").replace(/[&<>"]/g, function (c) {
              return { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;" }[c];
            });
            new PackLayer(tour.tiles.template, {
              minZoom: tour.tiles.minZoom, maxZoom: tour.tiles.maxZoom, bounds: coverage, attribution: escaped
            }).addTo(map);
          }
          L.rectangle(coverage, { color: "#1f5f8b", weight: 2, dashArray: "6 4", fill: false, className: "coverage" }).addTo(map);
          var view = L.latLngBounds(tour.route.length ? tour.route : tour.coverage);
          if (tour.route.length > 1) {
            L.polyline(tour.route, { color: "#c0392b", weight: 4, className: "route" }).addTo(map);
          }
          tour.pois.forEach(function (poi) {
            L.circle([poi.lat, poi.lon], {
              radius: poi.radius, color: "#d35400", weight: 2, fillOpacity: 0.12, className: "trigger"
            }).addTo(map);
            var link = document.createElement("a");
            link.href = poi.href;
            link.textContent = poi.name;
            L.marker([poi.lat, poi.lon], { title: poi.name, alt: poi.name }).bindPopup(link).addTo(map);
            view.extend([poi.lat, poi.lon]);
          });
          map.fitBounds(view.pad(0.1));
          document.body.setAttribute("data-map-ready", "true");
        })();
        """#
}

/// `assets/review.css`: plain, readable, and findings stand out.
enum ReviewStyle {
    static let css = """
        body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 0 1.2em 2em; color: #1d2327; }
        header { border-bottom: 1px solid #ccd; margin-bottom: 1em; }
        h1 { font-size: 1.5em; margin: .6em 0 .2em; }
        h2 { font-size: 1.15em; margin: 1.2em 0 .4em; }
        a { color: #1f5f8b; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: .3em .5em; border-bottom: 1px solid #e3e6ea; vertical-align: top; }
        th { background: #f3f5f7; font-weight: 600; }
        td.number, th.number { text-align: right; font-variant-numeric: tabular-nums; }
        td.created, td.expires, td.bitrate, td.size, td.duration { white-space: nowrap; }
        .passed { color: #1e7b34; }
        .failed { color: #b3261e; font-weight: 600; }
        #map { height: 520px; border: 1px solid #ccd; background: #eef1e8; }
        .notice { background: #fff6d6; border: 1px solid #e8d48a; padding: .4em .7em; }
        .findings { margin: .3em 0; padding-left: 1.2em; }
        .finding { color: #b3261e; }
        .finding.warning { color: #8a5a00; }
        section.phase { border: 1px solid #e3e6ea; border-radius: 6px; padding: .6em .9em; margin: .8em 0; }
        section.phase.has-findings { border: 2px solid #b3261e; background: #fff4f3; }
        section.phase audio { width: 100%; margin: .3em 0; }
        dl.facts { display: grid; grid-template-columns: max-content auto; gap: .1em 1em; margin: .4em 0; }
        dl.facts dt { color: #5a6470; }
        dl.facts dd { margin: 0; font-variant-numeric: tabular-nums; }
        .caption-cue { min-height: 1.45em; margin: .2em 0; font-style: italic; color: #2d3a45; }
        .narration { white-space: pre-wrap; background: #f7f8fa; padding: .5em .7em; border-radius: 4px; }
        code { font-size: .92em; }
        """
}
