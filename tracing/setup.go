package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Config says where spans go. The zero value, with no OTEL_* variables
// set, is tracing off.
type Config struct {
	// Endpoint is the base URL of an OTLP/HTTP receiver, e.g.
	// http://localhost:4318 (the binaries' --otlp-endpoint): spans are
	// posted to <Endpoint>/v1/traces. Empty: the standard variables
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL) or
	// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL) decide; with neither set,
	// tracing is off.
	Endpoint string
	// ServiceName names the process in its spans (service.name) unless
	// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says
	// otherwise; empty: "effectors".
	ServiceName string
	// Getenv reads the OTEL_* variables that decide whether tracing is on
	// (see Endpoint), OTEL_SDK_DISABLED, and the exporter's settings:
	// OTEL_EXPORTER_OTLP_HEADERS (key=value,... percent-encoded values),
	// OTEL_EXPORTER_OTLP_TIMEOUT (milliseconds, default 10000),
	// OTEL_EXPORTER_OTLP_COMPRESSION (gzip or none),
	// OTEL_EXPORTER_OTLP_CERTIFICATE (a CA file) and
	// OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE / _CLIENT_KEY, each also as
	// OTEL_EXPORTER_OTLP_TRACES_*, which wins; nil: no variable is set.
	// The SDK itself reads the rest (OTEL_TRACES_SAMPLER,
	// OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_*, OTEL_SERVICE_NAME,
	// OTEL_RESOURCE_ATTRIBUTES) from the process environment.
	Getenv func(string) string
}

// On reports whether c turns tracing on: an Endpoint or one of the OTLP
// endpoint variables, and OTEL_SDK_DISABLED not "true".
func (c Config) On() bool {
	getenv := c.getenv()
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return c.Endpoint != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

func (c Config) getenv() func(string) string {
	if c.Getenv == nil {
		return func(string) string { return "" }
	}
	return c.Getenv
}

// Validate reports a setting Setup would refuse, as an error matching
// [ErrInvalid] that names it.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate is Validate, returning the exporter's settings it read.
func (c Config) validate() (settings, error) {
	if c.Endpoint != "" {
		if _, err := tracesURL(c.Endpoint); err != nil {
			return settings{}, err
		}
	}
	if p := strings.TrimSpace(c.getenv()("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")); p != "" && p != "http/protobuf" {
		return settings{}, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL %q: only http/protobuf is supported (OTLP over HTTP, port 4318)", ErrInvalid, p)
	}
	if p := strings.TrimSpace(c.getenv()("OTEL_EXPORTER_OTLP_PROTOCOL")); p != "" && p != "http/protobuf" {
		return settings{}, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL %q: only http/protobuf is supported (OTLP over HTTP, port 4318)", ErrInvalid, p)
	}
	return exportSettings(c.getenv())
}

// tracesURL is the URL spans are posted to for the base URL endpoint.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: OTLP endpoint %q: want the base URL of an OTLP/HTTP receiver, e.g. http://localhost:4318", ErrInvalid, endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u.String(), nil
}

// Setup starts exporting spans over OTLP/HTTP as c says and returns the
// Tracer to hand to the runtime's parts (actor.Options.Intercept via
// [Tracer.Intercept], supervisor and gateway configs) and a shutdown
// function that flushes the spans still buffered and stops the exporter;
// call it once, when the process stops. With tracing off (see [Config.On])
// it returns a nil Tracer and a shutdown that does nothing.
//
// Spans are batched (OTEL_BSP_* tune the batches) and sampled as
// OTEL_TRACES_SAMPLER says (default: parentbased_always_on, so a record
// whose publisher sampled its trace is traced, and one whose publisher did
// not is not). Nothing is set globally: the Tracer is passed explicitly.
func Setup(ctx context.Context, c Config) (*Tracer, func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	set, err := c.validate()
	if err != nil {
		return nil, noop, err
	}
	if !c.On() {
		return nil, noop, nil
	}
	getenv := c.getenv()
	var endpoint string
	switch full := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); {
	case c.Endpoint != "" || full == "":
		base := c.Endpoint
		if base == "" {
			base = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
		}
		u, err := tracesURL(base)
		if err != nil {
			return nil, noop, err
		}
		endpoint = u
	default:
		if _, err := tracesURL(full); err != nil {
			return nil, noop, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT %q: want a URL such as http://localhost:4318/v1/traces", ErrInvalid, full)
		}
		endpoint = full
	}
	exp, err := otlptrace.New(ctx, newExporter(endpoint, set))
	if err != nil {
		return nil, noop, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	name := c.ServiceName
	if name == "" {
		name = "effectors"
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", name)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, noop, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: %w", ErrInvalid, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return New(tp), tp.Shutdown, nil
}
