package kubernetes

import (
	"context"
	"net/url"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// client is the provider's API client: the few calls it makes on pods,
// Secrets, nodes, access reviews, exec and the runner's Job, over REST
// clients whose scheme holds only core/v1, authorization/v1 and batch/v1.
//
// client-go's generated clientset would do, but importing it registers
// every API group of Kubernetes when the program starts, which costs every
// outpost process (most never talk to a cluster) about 8 MiB of memory.
type client struct {
	core  *rest.RESTClient
	authz *rest.RESTClient
	batch *rest.RESTClient
}

// codecs is the scheme of the client, built on first use.
var codecs = sync.OnceValue(func() struct {
	factory serializer.CodecFactory
	params  runtime.ParameterCodec
} {
	s := runtime.NewScheme()
	// Status, WatchEvent and the option types of the unversioned "v1".
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := corev1.AddToScheme(s); err != nil {
		panic(err) // a static registration: cannot fail
	}
	if err := authorizationv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := batchv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return struct {
		factory serializer.CodecFactory
		params  runtime.ParameterCodec
	}{serializer.NewCodecFactory(s), runtime.NewParameterCodec(s)}
})

// newClient builds the REST clients of cfg, sharing one HTTP client.
func newClient(cfg *rest.Config) (*client, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	groupClient := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = apiPath
		c.NegotiatedSerializer = codecs().factory.WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		return rest.RESTClientForConfigAndClient(c, hc)
	}
	core, err := groupClient(corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	authz, err := groupClient(authorizationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	batch, err := groupClient(batchv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return &client{core: core, authz: authz, batch: batch}, nil
}

// version asks the API server for its version: the reachability probe.
func (c *client) version(ctx context.Context) error {
	return c.core.Get().AbsPath("/version").Do(ctx).Error()
}

func (c *client) getPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := c.core.Get().Namespace(ns).Resource("pods").Name(name).Do(ctx).Into(pod)
	return pod, err
}

func (c *client) createPod(ctx context.Context, ns string, pod *corev1.Pod) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := c.core.Post().Namespace(ns).Resource("pods").Body(pod).Do(ctx).Into(out)
	return out, err
}

func (c *client) createSecret(ctx context.Context, ns string, sec *corev1.Secret) error {
	return c.core.Post().Namespace(ns).Resource("secrets").Body(sec).Do(ctx).Error()
}

// listPods lists the pods of ns ("" for all namespaces).
func (c *client) listPods(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := c.core.Get().Namespace(ns).Resource("pods").VersionedParams(&opts, codecs().params).Do(ctx).Into(out)
	return out, err
}

// listSecrets lists the Secrets of ns ("" for all namespaces).
func (c *client) listSecrets(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.SecretList, error) {
	out := &corev1.SecretList{}
	err := c.core.Get().Namespace(ns).Resource("secrets").VersionedParams(&opts, codecs().params).Do(ctx).Into(out)
	return out, err
}

func (c *client) listNodes(ctx context.Context) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	err := c.core.Get().Resource("nodes").Do(ctx).Into(out)
	return out, err
}

func (c *client) getNode(ctx context.Context, name string) (*corev1.Node, error) {
	out := &corev1.Node{}
	err := c.core.Get().Resource("nodes").Name(name).Do(ctx).Into(out)
	return out, err
}

// nodeConfigz reads the kubelet configuration of node through the API
// server's node proxy.
func (c *client) nodeConfigz(ctx context.Context, node string) ([]byte, error) {
	return c.core.Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("configz").DoRaw(ctx)
}

// watchPods watches the pods of ns; the watch ends with ctx or
// opts.TimeoutSeconds.
func (c *client) watchPods(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	opts.Watch = true
	return c.core.Get().Namespace(ns).Resource("pods").VersionedParams(&opts, codecs().params).Timeout(timeout).Watch(ctx)
}

// mergePatch applies a JSON merge patch to a namespaced object of resource
// ("pods", "secrets").
func (c *client) mergePatch(ctx context.Context, resource, ns, name string, patch []byte) error {
	return c.core.Patch(types.MergePatchType).Namespace(ns).Resource(resource).Name(name).Body(patch).Do(ctx).Error()
}

// delete deletes a namespaced object of resource ("pods", "secrets").
func (c *client) delete(ctx context.Context, resource, ns, name string, opts metav1.DeleteOptions) error {
	return c.core.Delete().Namespace(ns).Resource(resource).Name(name).Body(&opts).Do(ctx).Error()
}

func (c *client) createJob(ctx context.Context, ns string, job *batchv1.Job) (*batchv1.Job, error) {
	out := &batchv1.Job{}
	err := c.batch.Post().Namespace(ns).Resource("jobs").Body(job).Do(ctx).Into(out)
	return out, err
}

// patchJob applies a JSON merge patch to a Job.
func (c *client) patchJob(ctx context.Context, ns, name string, patch []byte) error {
	return c.batch.Patch(types.MergePatchType).Namespace(ns).Resource("jobs").Name(name).Body(patch).Do(ctx).Error()
}

func (c *client) deleteJob(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	return c.batch.Delete().Namespace(ns).Resource("jobs").Name(name).Body(&opts).Do(ctx).Error()
}

func (c *client) accessReview(ctx context.Context, r *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error) {
	out := &authorizationv1.SelfSubjectAccessReview{}
	err := c.authz.Post().Resource("selfsubjectaccessreviews").Body(r).Do(ctx).Into(out)
	return out, err
}

// execURL is the address of an exec into a pod's container.
func (c *client) execURL(ns, name string, opts *corev1.PodExecOptions) *url.URL {
	return c.core.Post().Namespace(ns).Resource("pods").Name(name).SubResource("exec").
		VersionedParams(opts, codecs().params).URL()
}
