"""An independent implementation of tourpack's map tile selection.

TileMathCrossCheckTests runs this with a JSON file of cases and compares its
answer with TileMath's, tile for tile. The tile math is mercantile's, the
geometry is shapely's; only the rules (the buffered box, the local plane and
its reference latitude) are restated here, from the doc comment on
TileMath.tiles(route:pois:settings:).

Input:  {"cases": [{"name", "route": [[lat, lon], ...], "pois": [[lat, lon], ...],
                    "minZoom", "maxZoom", "bufferMiles"}, ...]}
Output: {name: {"bounds": [south, west, north, east],
                "ranges": [[zoom, minX, maxX, minY, maxY], ...],
                "corridor": [[z, x, y], ...]}}   sorted by z, x, y
Exit 3 when a module is missing.
"""
import json
import math
import sys

try:
    import mercantile
    import shapely
    from shapely.geometry import LineString, Point
except ImportError as error:
    print(f"MISSING: python3 cannot import {error.name}; install it (pip install mercantile shapely, or make setup-test)")
    sys.exit(3)

MAX_LATITUDE = 85.05112877980659
METERS_PER_DEGREE = 2 * math.pi * 6378137 / 360
METERS_PER_MILE = 1609.344
EPSILON_METERS = 1e-6


def clamp_latitude(lat):
    return min(max(lat, -MAX_LATITUDE), MAX_LATITUDE)


def buffered_bounds(points, buffer_miles):
    """The box of the points grown by the buffer; longitude by the most poleward edge."""
    lats = [p[0] for p in points]
    lons = [p[1] for p in points]
    lat_delta = buffer_miles * METERS_PER_MILE / METERS_PER_DEGREE
    south = max(min(lats) - lat_delta, -MAX_LATITUDE)
    north = min(max(lats) + lat_delta, MAX_LATITUDE)
    widest = math.radians(min(max(abs(south), abs(north)), 89.0))
    lon_delta = lat_delta / math.cos(widest)
    return south, max(min(lons) - lon_delta, -180.0), north, min(max(lons) + lon_delta, 180.0)


def pieces(route, pois, lat_delta):
    """(shapely geometry in its plane, cos of its reference latitude) per segment and POI."""
    spans = list(zip(route, route[1:])) if len(route) > 1 else [(p, p) for p in route]
    spans += [(p, p) for p in pois]
    result = []
    for a, b in spans:
        a = (clamp_latitude(a[0]), a[1])
        b = (clamp_latitude(b[0]), b[1])
        reference = min(max(abs(a[0]), abs(b[0])) + lat_delta, MAX_LATITUDE, 89.0)
        scale = math.cos(math.radians(reference))
        ends = [(lon * scale * METERS_PER_DEGREE, lat * METERS_PER_DEGREE) for lat, lon in (a, b)]
        geometry = Point(ends[0]) if ends[0] == ends[1] else LineString(ends)
        result.append((geometry, scale))
    return result


def run(case):
    route, pois = case["route"], case["pois"]
    buffer_miles = case["bufferMiles"]
    zooms = list(range(case["minZoom"], case["maxZoom"] + 1))
    south, west, north, east = buffered_bounds(route + pois, buffer_miles)

    candidates = list(mercantile.tiles(west, south, east, north, zooms))
    ranges = []
    for z in zooms:
        level = [t for t in candidates if t.z == z]
        xs, ys = [t.x for t in level], [t.y for t in level]
        ranges.append([z, min(xs), max(xs), min(ys), max(ys)])

    # Every tile of the box against every piece, brute force: nothing clever to get wrong.
    lat_delta = buffer_miles * METERS_PER_MILE / METERS_PER_DEGREE
    reach = buffer_miles * METERS_PER_MILE + EPSILON_METERS
    tile_bounds = [mercantile.bounds(t) for t in candidates]
    kept = [False] * len(candidates)
    for geometry, scale in pieces(route, pois, lat_delta):
        to_x = scale * METERS_PER_DEGREE
        boxes = shapely.box(
            [b.west * to_x for b in tile_bounds], [b.south * METERS_PER_DEGREE for b in tile_bounds],
            [b.east * to_x for b in tile_bounds], [b.north * METERS_PER_DEGREE for b in tile_bounds])
        for i, distance in enumerate(shapely.distance(boxes, geometry)):
            if distance <= reach:
                kept[i] = True
    corridor = sorted([t.z, t.x, t.y] for t, keep in zip(candidates, kept) if keep)
    return {"bounds": [south, west, north, east], "ranges": ranges, "corridor": corridor}


def main():
    cases = json.load(open(sys.argv[1]))["cases"]
    json.dump({case["name"]: run(case) for case in cases}, sys.stdout)


if __name__ == "__main__":
    main()
