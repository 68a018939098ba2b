package ecscheck

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// kind is how a JSON value of an ECS type is checked.
type kind int

const (
	kindString    kind = iota + 1 // keyword, constant_keyword, wildcard, match_only_text
	kindIP                        // ip: an IPv4 or IPv6 address string
	kindLong                      // long: a JSON integer in int64 range
	kindInteger                   // integer: a JSON integer in int32 range
	kindFloat                     // float, double, scaled_float: a JSON number
	kindBool                      // boolean: true or false
	kindDate                      // date: RFC 3339 string or integer epoch milliseconds
	kindGeoPoint                  // geo_point: one of Elasticsearch's point notations
	kindObject                    // object: an object (open, closed or a map of object_type)
	kindFlattened                 // flattened: an object of any content
	kindNested                    // nested: objects whose members are fields below it
)

// kindOf maps an ECS field type to its kind. It covers exactly the types
// that occur in ECS 9.4.0; a type it does not know is an error, so facts
// regenerated from a release with a new type fail loudly instead of going
// unchecked.
func kindOf(ecsType string) (kind, error) {
	switch ecsType {
	case "keyword", "constant_keyword", "wildcard", "match_only_text":
		return kindString, nil
	case "ip":
		return kindIP, nil
	case "long":
		return kindLong, nil
	case "integer":
		return kindInteger, nil
	case "float", "double", "scaled_float":
		return kindFloat, nil
	case "boolean":
		return kindBool, nil
	case "date":
		return kindDate, nil
	case "geo_point":
		return kindGeoPoint, nil
	case "object":
		return kindObject, nil
	case "flattened":
		return kindFlattened, nil
	case "nested":
		return kindNested, nil
	}
	return 0, fmt.Errorf("unsupported ECS type %q", ecsType)
}

// checkScalar reports why v is not a value of kind k (typ is the ECS type,
// for the message), or "" when it is one. Objects, arrays and geo points
// are handled by the caller.
func checkScalar(k kind, typ string, v any) string {
	switch k {
	case kindString:
		return wantString(typ, v)
	case kindIP:
		return checkIP(v)
	case kindLong:
		return checkInt(typ, v, 64)
	case kindInteger:
		return checkInt(typ, v, 32)
	case kindFloat:
		return checkFloat(typ, v)
	case kindBool:
		if _, ok := v.(bool); !ok {
			return "expected a boolean, got " + describe(v)
		}
		return ""
	case kindDate:
		return checkDate(v)
	default:
		return fmt.Sprintf("an ECS %s field takes no scalar value, got %s", typ, describe(v))
	}
}

func wantString(typ string, v any) string {
	if _, ok := v.(string); !ok {
		return fmt.Sprintf("expected a string (ECS %s), got %s", typ, describe(v))
	}
	return ""
}

func checkIP(v any) string {
	s, ok := v.(string)
	if !ok {
		return "expected an IP address string (ECS ip), got " + describe(v)
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return fmt.Sprintf("%q is not an IPv4 or IPv6 address (ECS ip)", s)
	}
	return ""
}

func checkInt(typ string, v any, bits int) string {
	n, ok := v.(json.Number)
	if !ok {
		return fmt.Sprintf("expected a JSON integer (ECS %s), got %s", typ, describe(v))
	}
	if _, err := strconv.ParseInt(n.String(), 10, bits); err != nil {
		return fmt.Sprintf("%s is not an integer in the range of ECS %s", n, typ)
	}
	return ""
}

func checkFloat(typ string, v any) string {
	n, ok := v.(json.Number)
	if !ok {
		return fmt.Sprintf("expected a JSON number (ECS %s), got %s", typ, describe(v))
	}
	if f, err := n.Float64(); err != nil || math.IsInf(f, 0) {
		return fmt.Sprintf("%s is out of range for ECS %s", n, typ)
	}
	return ""
}

func checkDate(v any) string {
	switch d := v.(type) {
	case string:
		if _, err := time.Parse(time.RFC3339Nano, d); err != nil {
			return fmt.Sprintf("%q is not an RFC 3339 date-time (ECS date)", d)
		}
		return ""
	case json.Number:
		if _, err := strconv.ParseInt(d.String(), 10, 64); err != nil {
			return fmt.Sprintf("%s is not integer epoch milliseconds (ECS date)", d)
		}
		return ""
	}
	return "expected an RFC 3339 string or integer epoch milliseconds (ECS date), got " + describe(v)
}

// checkGeoPoint reports why v is not one point in a notation Elasticsearch
// accepts for geo_point: {"lat":..,"lon":..}, a GeoJSON Point, "lat,lon",
// "POINT (lon lat)", a geohash, or [lon, lat].
func checkGeoPoint(v any) string {
	switch p := v.(type) {
	case map[string]any:
		return checkGeoObject(p)
	case string:
		return checkGeoString(p)
	case []any:
		if lon, lat, ok := lonLatArray(p); ok {
			return checkLatLon(lat, lon)
		}
	}
	return "expected a geo point ({\"lat\":..,\"lon\":..}, \"lat,lon\", \"POINT (lon lat)\", a geohash or [lon, lat]), got " + describe(v)
}

func checkGeoObject(p map[string]any) string {
	if p["type"] == "Point" {
		if c, ok := p["coordinates"].([]any); ok && len(p) == 2 {
			if lon, lat, ok := lonLatArray(c); ok {
				return checkLatLon(lat, lon)
			}
		}
		return "a GeoJSON point needs exactly type and coordinates [lon, lat]"
	}
	lat, okLat := number(p["lat"])
	lon, okLon := number(p["lon"])
	if !okLat || !okLon || len(p) != 2 {
		return "a geo point object needs exactly the numbers lat and lon"
	}
	return checkLatLon(lat, lon)
}

func checkGeoString(s string) string {
	if lon, lat, ok := wktPoint(s); ok {
		return checkLatLon(lat, lon)
	}
	if latS, lonS, ok := strings.Cut(s, ","); ok {
		lat, err1 := strconv.ParseFloat(strings.TrimSpace(latS), 64)
		lon, err2 := strconv.ParseFloat(strings.TrimSpace(lonS), 64)
		if err1 == nil && err2 == nil {
			return checkLatLon(lat, lon)
		}
	}
	if isGeohash(s) {
		return ""
	}
	return fmt.Sprintf("%q is not a geo point (\"lat,lon\", \"POINT (lon lat)\" or a geohash)", s)
}

// wktPoint reads a WKT point, "POINT (lon lat)".
func wktPoint(s string) (lon, lat float64, ok bool) {
	body, found := strings.CutPrefix(s, "POINT")
	if !found {
		return 0, 0, false
	}
	body = strings.TrimSpace(body)
	body, open := strings.CutPrefix(body, "(")
	body, closed := strings.CutSuffix(body, ")")
	xy := strings.Fields(body)
	if !open || !closed || len(xy) != 2 {
		return 0, 0, false
	}
	lon, err1 := strconv.ParseFloat(xy[0], 64)
	lat, err2 := strconv.ParseFloat(xy[1], 64)
	return lon, lat, err1 == nil && err2 == nil
}

// isGeohash reports whether s is a geohash: 1 to 12 base-32 digits, the
// alphabet being 0-9 and a-z without a, i, l and o.
func isGeohash(s string) bool {
	if s == "" || len(s) > 12 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789bcdefghjkmnpqrstuvwxyz", r) {
			return false
		}
	}
	return true
}

// lonLatArray reads [lon, lat] or [lon, lat, z].
func lonLatArray(a []any) (lon, lat float64, ok bool) {
	if len(a) != 2 && len(a) != 3 {
		return 0, 0, false
	}
	for _, e := range a {
		if _, isNum := number(e); !isNum {
			return 0, 0, false
		}
	}
	lon, _ = number(a[0])
	lat, _ = number(a[1])
	return lon, lat, true
}

func checkLatLon(lat, lon float64) string {
	switch {
	case lat < -90 || lat > 90:
		return fmt.Sprintf("latitude %g is out of range [-90, 90]", lat)
	case lon < -180 || lon > 180:
		return fmt.Sprintf("longitude %g is out of range [-180, 180]", lon)
	}
	return ""
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// describe names the JSON type of v, with the value when it is short.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			return "a string"
		}
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + x.String()
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}
