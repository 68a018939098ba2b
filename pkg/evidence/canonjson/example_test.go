package canonjson_test

import (
	"fmt"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
)

func ExampleAppendJSON() {
	out, err := canonjson.AppendJSON(nil, []byte(`{"b": [1.50, "\u00e9"], "a": {"y": -0, "x": 1E3}}`))
	fmt.Println(string(out), err)
	_, err = canonjson.AppendJSON(nil, []byte(`{"a": 1, "a": 2}`))
	fmt.Println(err)
	// Output:
	// {"a":{"x":1000,"y":0},"b":[1.5,"é"]} <nil>
	// line 1 column 10: duplicate object key "a"
}

func ExampleAppendJSONFunc() {
	var host string
	out, err := canonjson.AppendJSONFunc(nil, []byte(`{"status": "drift", "host": "web-01"}`), func(key, value []byte) {
		if string(key) == "host" {
			host = string(value)
		}
	})
	fmt.Println(string(out), host, err)
	// Output:
	// {"host":"web-01","status":"drift"} "web-01" <nil>
}
