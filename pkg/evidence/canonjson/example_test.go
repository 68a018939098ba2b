package canonjson_test

import (
	"fmt"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
)

func ExampleTransform() {
	out, err := canonjson.Transform([]byte(`{"b": [1.50, "\u00e9"], "a": {"y": -0, "x": 1E3}}`))
	fmt.Println(string(out), err)
	_, err = canonjson.Transform([]byte(`{"a": 1, "a": 2}`))
	fmt.Println(err)
	// Output:
	// {"a":{"x":1000,"y":0},"b":[1.5,"é"]} <nil>
	// canonicalize: line 1 column 10: duplicate object member name "a"
}
