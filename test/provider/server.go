package provider

import (
	"context"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Provider serves the Pulumi ResourceProvider gRPC service for the
// stackyardtest package. The engine starts one per provider instance in a
// stack and calls it for every resource of the package. Methods it leaves to
// the embedded Unimplemented server (Construct, Call, Parameterize, ...) are
// ones the engine calls only for features this package does not offer.
type Provider struct {
	pulumirpc.UnimplementedResourceProviderServer

	// stopped is cancelled by the Cancel call (or Stop), which the engine
	// makes when the user interrupts an operation; every running and later
	// lifecycle call sees it through opContext.
	stopped context.Context
	stop    context.CancelFunc
}

// New returns a Provider ready to be registered on a gRPC server.
func New() *Provider {
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{stopped: ctx, stop: cancel}
}

// Stop cancels every running and future operation, as the Cancel call does.
// Main calls it when the process is told to exit, so sleeps end at once.
func (p *Provider) Stop() { p.stop() }

// opContext returns a context for one lifecycle call: done when the call's
// own context is (the engine went away or gave up), when the provider is
// stopped, or after timeout seconds when timeout is positive. The engine
// sends a resource's customTimeouts option as the call's timeout and
// leaves enforcing it to the provider, as real providers do. The returned
// function must be called when the call ends.
func (p *Provider) opContext(ctx context.Context, timeout float64) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, time.Duration(timeout*float64(time.Second)))
		parent := cancel
		cancel = func() { cancelTimeout(); parent() }
	}
	unhook := context.AfterFunc(p.stopped, cancel)
	return ctx, func() { unhook(); cancel() }
}

// unmarshalOpts decodes property structs keeping unknowns and secrets as
// such, so Check and Diff can tell them apart from plain values.
var unmarshalOpts = plugin.MarshalOptions{
	Label: Name, KeepUnknowns: true, KeepSecrets: true, KeepResources: true, SkipNulls: true,
}

// marshalOpts encodes property structs, sending secrets and unknowns on to
// the engine (which accepts both; see Configure).
var marshalOpts = plugin.MarshalOptions{
	Label: Name, KeepUnknowns: true, KeepSecrets: true, KeepResources: true,
}

func unmarshal(s *structpb.Struct) (resource.PropertyMap, error) {
	if s == nil {
		return resource.PropertyMap{}, nil
	}
	m, err := plugin.UnmarshalProperties(s, unmarshalOpts)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "decoding properties: %v", err)
	}
	return m, nil
}

func marshal(m resource.PropertyMap) (*structpb.Struct, error) {
	s, err := plugin.MarshalProperties(m, marshalOpts)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encoding properties: %v", err)
	}
	return s, nil
}

// typeOf returns the resource type token of a call, from its URN (always
// set) or else from its type field.
func typeOf(urn, typ string) string {
	if u := resource.URN(urn); u.IsValid() {
		return string(u.Type())
	}
	return typ
}

// opsFor returns the implementation of a resource type.
func opsFor(token string) (resourceOps, error) {
	ops, ok := resourceTypes[token]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown resource type %q", token)
	}
	return ops, nil
}

// Handshake is the engine's first call in current engines; the answer says
// which protocol features this provider understands.
func (p *Provider) Handshake(context.Context, *pulumirpc.ProviderHandshakeRequest) (*pulumirpc.ProviderHandshakeResponse, error) {
	return &pulumirpc.ProviderHandshakeResponse{AcceptSecrets: true, AcceptResources: true}, nil
}

// GetPluginInfo reports the plugin's version, which the engine records as
// the provider's version in the stack state.
func (p *Provider) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: Version}, nil
}

// GetSchema returns the package schema, which Pulumi YAML loads to know the
// resources' properties and type-check a program against them.
func (p *Provider) GetSchema(_ context.Context, req *pulumirpc.GetSchemaRequest) (*pulumirpc.GetSchemaResponse, error) {
	if req.GetSubpackageName() != "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s has no subpackage %q", Name, req.GetSubpackageName())
	}
	return &pulumirpc.GetSchemaResponse{Schema: Schema()}, nil
}

// CheckConfig accepts any provider configuration unchanged: the package
// has none, and the engine adds keys of its own (such as version).
func (p *Provider) CheckConfig(_ context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	return &pulumirpc.CheckResponse{Inputs: req.GetNews()}, nil
}

// DiffConfig reports that a change of provider configuration never matters,
// so it never replaces the provider (and with it every resource).
func (p *Provider) DiffConfig(context.Context, *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
}

// Configure takes the (empty) configuration and says that secrets and
// resource references may be sent, and that Create and Update understand
// preview, so a preview shows the outputs that can be predicted.
func (p *Provider) Configure(context.Context, *pulumirpc.ConfigureRequest) (*pulumirpc.ConfigureResponse, error) {
	return &pulumirpc.ConfigureResponse{AcceptSecrets: true, AcceptResources: true, SupportsPreview: true}, nil
}

// Check validates a resource's inputs. Each failure names its property in
// its reason too ("length: must be a positive integer"), since that reason
// is what users read.
func (p *Provider) Check(_ context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	news, err := unmarshal(req.GetNews())
	if err != nil {
		return nil, err
	}
	checked, failures := checkInputs(typeOf(req.GetUrn(), req.GetType()), news)
	inputs, err := marshal(checked)
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.CheckResponse{Inputs: inputs}
	for _, f := range failures {
		resp.Failures = append(resp.Failures, &pulumirpc.CheckFailure{Property: f.Property, Reason: f.String()})
	}
	return resp, nil
}

// Diff compares the recorded state with the program's checked inputs and
// says which properties change and which of them replace the resource.
func (p *Provider) Diff(_ context.Context, req *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	olds, err := unmarshal(req.GetOlds())
	if err != nil {
		return nil, err
	}
	news, err := unmarshal(req.GetNews())
	if err != nil {
		return nil, err
	}
	changes, err := diffInputs(typeOf(req.GetUrn(), req.GetType()), olds, news)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return diffResponse(changes), nil
}

// Create makes a resource (or, in a preview, predicts its outputs).
func (p *Provider) Create(ctx context.Context, req *pulumirpc.CreateRequest) (*pulumirpc.CreateResponse, error) {
	ops, err := opsFor(typeOf(req.GetUrn(), req.GetType()))
	if err != nil {
		return nil, err
	}
	in, err := unmarshal(req.GetProperties())
	if err != nil {
		return nil, err
	}
	ctx, done := p.opContext(ctx, req.GetTimeout())
	defer done()
	id, out, err := ops.create(ctx, in, req.GetPreview())
	if err != nil {
		return nil, err
	}
	if !req.GetPreview() {
		if err := journal(journalCreate, req.GetUrn(), id, in); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	props, err := marshal(out)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CreateResponse{Id: id, Properties: props}, nil
}

// Read returns a resource as it is now, for refresh and import. An empty ID
// in the answer tells the engine the resource no longer exists.
func (p *Provider) Read(ctx context.Context, req *pulumirpc.ReadRequest) (*pulumirpc.ReadResponse, error) {
	ops, err := opsFor(typeOf(req.GetUrn(), req.GetType()))
	if err != nil {
		return nil, err
	}
	state, err := unmarshal(req.GetProperties())
	if err != nil {
		return nil, err
	}
	inputs, err := unmarshal(req.GetInputs())
	if err != nil {
		return nil, err
	}
	ctx, done := p.opContext(ctx, 0)
	defer done()
	id, out, ins, err := ops.read(ctx, req.GetId(), state, inputs)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return &pulumirpc.ReadResponse{}, nil
	}
	props, err := marshal(out)
	if err != nil {
		return nil, err
	}
	insStruct, err := marshal(ins)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.ReadResponse{Id: id, Properties: props, Inputs: insStruct}, nil
}

// Update applies changes that Diff said need no replacement.
func (p *Provider) Update(ctx context.Context, req *pulumirpc.UpdateRequest) (*pulumirpc.UpdateResponse, error) {
	ops, err := opsFor(typeOf(req.GetUrn(), req.GetType()))
	if err != nil {
		return nil, err
	}
	olds, err := unmarshal(req.GetOlds())
	if err != nil {
		return nil, err
	}
	news, err := unmarshal(req.GetNews())
	if err != nil {
		return nil, err
	}
	ctx, done := p.opContext(ctx, req.GetTimeout())
	defer done()
	out, err := ops.update(ctx, req.GetId(), olds, news, req.GetPreview())
	if err != nil {
		return nil, err
	}
	if !req.GetPreview() {
		if err := journal(journalUpdate, req.GetUrn(), req.GetId(), news); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	props, err := marshal(out)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.UpdateResponse{Properties: props}, nil
}

// Delete removes a resource.
func (p *Provider) Delete(ctx context.Context, req *pulumirpc.DeleteRequest) (*emptypb.Empty, error) {
	ops, err := opsFor(typeOf(req.GetUrn(), req.GetType()))
	if err != nil {
		return nil, err
	}
	state, err := unmarshal(req.GetProperties())
	if err != nil {
		return nil, err
	}
	ctx, done := p.opContext(ctx, req.GetTimeout())
	defer done()
	if err := ops.delete(ctx, req.GetId(), state); err != nil {
		return nil, err
	}
	if err := journal(journalDelete, req.GetUrn(), req.GetId(), state); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &emptypb.Empty{}, nil
}

// Cancel is the engine's request to stop work in progress, made when the
// user interrupts an operation: running sleeps return an error at once.
func (p *Provider) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	p.Stop()
	return &emptypb.Empty{}, nil
}

// Attach is how an engine connects to a provider started by hand (for
// debugging, with PULUMI_DEBUG_PROVIDERS); this provider needs nothing from
// the engine, so it only acknowledges.
func (p *Provider) Attach(context.Context, *pulumirpc.PluginAttach) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// GetMapping answers that this provider has no mapping to another
// ecosystem's provider (used by `pulumi convert`).
func (p *Provider) GetMapping(context.Context, *pulumirpc.GetMappingRequest) (*pulumirpc.GetMappingResponse, error) {
	return &pulumirpc.GetMappingResponse{}, nil
}

// GetMappings is the plural of GetMapping, with the same empty answer.
func (p *Provider) GetMappings(context.Context, *pulumirpc.GetMappingsRequest) (*pulumirpc.GetMappingsResponse, error) {
	return &pulumirpc.GetMappingsResponse{}, nil
}

// Invoke fails: the package has no functions.
func (p *Provider) Invoke(_ context.Context, req *pulumirpc.InvokeRequest) (*pulumirpc.InvokeResponse, error) {
	return nil, status.Errorf(codes.NotFound, "%s has no function %q", Name, req.GetTok())
}

// compile-time check that Provider is a complete ResourceProvider server.
var _ pulumirpc.ResourceProviderServer = (*Provider)(nil)
