package cli

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/effectors/effectors/tracing"
)

// OTLPSetting is the --otlp-endpoint setting (EA_OTLP_ENDPOINT): where the
// binary exports trace spans, checked into the field of C that field
// returns. Empty leaves it to the standard OTEL_EXPORTER_OTLP_* variables;
// with none of them either, tracing is off.
func OTLPSetting[C any](field func(*C) *string) *Setting[C] {
	return &Setting[C]{Name: "otlp-endpoint", Arg: "URL", Def: "",
		DefText: "off, unless OTEL_EXPORTER_OTLP_ENDPOINT is set",
		Usage:   "base URL of an OTLP/HTTP receiver (an OpenTelemetry collector, Jaeger, Tempo...) to export trace spans to, e.g. http://localhost:4318; the OTEL_* variables (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER...) apply (docs/tracing.md)",
		Check: func(c *C, v string) string {
			v = strings.TrimSpace(v)
			if v != "" && (tracing.Config{Endpoint: v}).Validate() != nil {
				return "want the base URL of an OTLP/HTTP receiver, e.g. http://localhost:4318 (spans go to <URL>/v1/traces), or empty for off"
			}
			*field(c) = v
			return ""
		}}
}

// StartTracing sets up tracing for program as endpoint (its
// --otlp-endpoint) and the process's OTEL_* variables say, and logs where
// spans go. It returns a nil Tracer when tracing is off, and a function
// that flushes the spans still buffered (for up to 5s), to call once the
// process has stopped its work.
func StartTracing(ctx context.Context, program, endpoint string, log *slog.Logger) (*tracing.Tracer, func(), error) {
	t, shutdown, err := tracing.Setup(ctx, tracing.Config{Endpoint: endpoint, ServiceName: program, Getenv: os.Getenv})
	if err != nil {
		return nil, func() {}, err
	}
	if t == nil {
		return nil, func() {}, nil
	}
	where := endpoint
	if where == "" {
		where = "the OTEL_EXPORTER_OTLP_* endpoint"
	}
	log.Info("tracing on: exporting spans over OTLP/HTTP", "endpoint", where)
	return t, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("tracing: flushing spans failed", "err", err)
		}
	}, nil
}
