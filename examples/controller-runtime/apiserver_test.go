package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fakeAPIServer serves as much of the Kubernetes API over HTTP as a
// controller-runtime manager that reconciles the ConfigMaps of a namespace
// under leader election needs: discovery and /version; ConfigMaps — list,
// watch (also the watch-list stream client-go opens first), get, update
// and JSON merge patch; coordination.k8s.io/v1 leases — get, create and
// update; and events, whose writes are accepted and dropped. Objects live
// in memory under one resourceVersion counter, and open watches see every
// change to ConfigMaps. It is safe for concurrent use.
type fakeAPIServer struct {
	srv  *httptest.Server
	done chan struct{} // closed by Close: ends the open watches

	mu       sync.Mutex
	rv       int // the last resourceVersion given out
	objects  map[objectKey]client.Object
	history  []configMapEvent      // every change to a ConfigMap, in order
	watchers map[*watcher]struct{} // the open ConfigMap watches
	unserved []string              // requests for paths the server does not serve

	// refuseWatchList makes the server refuse watch-lists as API servers
	// before 1.27 do, so that clients list, then watch.
	refuseWatchList bool
}

// objectKey names a stored object.
type objectKey struct{ resource, namespace, name string }

// configMapEvent is a change to a ConfigMap, as a watch reports it.
type configMapEvent struct {
	typ watch.EventType
	rv  int
	obj *corev1.ConfigMap
}

// watcher is an open ConfigMap watch of one namespace.
type watcher struct {
	namespace string
	events    chan configMapEvent // closed when the watcher fell behind
}

// codecs decodes the bodies of requests.
var codecs = serializer.NewCodecFactory(clientgoscheme.Scheme)

// Kinds of the objects the server stores, by resource.
var kinds = map[string]schema.GroupVersionKind{
	"configmaps": corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	"leases":     coordinationv1.SchemeGroupVersion.WithKind("Lease"),
}

// newFakeAPIServer starts a fakeAPIServer that t closes when done. With
// watchList false, it refuses watch-lists as API servers before 1.27 do.
func newFakeAPIServer(t *testing.T, watchList bool) *fakeAPIServer {
	t.Helper()
	s := &fakeAPIServer{
		done:            make(chan struct{}),
		objects:         map[objectKey]client.Object{},
		watchers:        map[*watcher]struct{}{},
		refuseWatchList: !watchList,
	}
	s.srv = httptest.NewServer(s.routes())
	t.Cleanup(s.Close)
	return s
}

// URL returns the server's base URL.
func (s *fakeAPIServer) URL() string { return s.srv.URL }

// Close ends the open watches and stops the server.
func (s *fakeAPIServer) Close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.srv.Close()
}

// routes returns the server's handler.
func (s *fakeAPIServer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2-fake"})
	})
	mux.HandleFunc("GET /api", s.coreVersions)
	mux.HandleFunc("GET /apis", s.groups)
	mux.HandleFunc("GET /api/v1", s.resourceList("v1",
		metav1.APIResource{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap",
			Verbs: metav1.Verbs{"get", "list", "watch", "update", "patch"}},
		metav1.APIResource{Name: "events", SingularName: "event", Namespaced: true, Kind: "Event",
			Verbs: metav1.Verbs{"create", "update", "patch"}}))
	mux.HandleFunc("GET /apis/coordination.k8s.io/v1", s.resourceList("coordination.k8s.io/v1",
		metav1.APIResource{Name: "leases", SingularName: "lease", Namespaced: true, Kind: "Lease",
			Verbs: metav1.Verbs{"get", "create", "update"}}))
	mux.HandleFunc("GET /apis/events.k8s.io/v1", s.resourceList("events.k8s.io/v1",
		metav1.APIResource{Name: "events", SingularName: "event", Namespaced: true, Kind: "Event",
			Verbs: metav1.Verbs{"create", "update", "patch"}}))

	const cms = "/api/v1/namespaces/{ns}/configmaps"
	mux.HandleFunc("GET "+cms, s.listOrWatchConfigMaps)
	mux.HandleFunc("GET "+cms+"/{name}", s.get("configmaps"))
	mux.HandleFunc("PUT "+cms+"/{name}", s.update("configmaps", func() client.Object { return &corev1.ConfigMap{} }))
	mux.HandleFunc("PATCH "+cms+"/{name}", s.mergePatchConfigMap)

	const leases = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
	mux.HandleFunc("GET "+leases+"/{name}", s.get("leases"))
	mux.HandleFunc("POST "+leases, s.create("leases", func() client.Object { return &coordinationv1.Lease{} }))
	mux.HandleFunc("PUT "+leases+"/{name}", s.update("leases", func() client.Object { return &coordinationv1.Lease{} }))

	for _, events := range []string{"/api/v1/namespaces/{ns}/events", "/apis/events.k8s.io/v1/namespaces/{ns}/events"} {
		mux.HandleFunc(events, acceptEvent)
		mux.HandleFunc(events+"/{name}", acceptEvent)
	}
	mux.HandleFunc("/", s.notServed)
	return mux
}

// coreVersions serves /api, the legacy discovery of the core group.
func (s *fakeAPIServer) coreVersions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, &metav1.APIVersions{
		TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}},
	})
}

// groups serves /apis, the legacy discovery of the named groups.
func (s *fakeAPIServer) groups(w http.ResponseWriter, _ *http.Request) {
	group := func(name string) metav1.APIGroup {
		v := metav1.GroupVersionForDiscovery{GroupVersion: name + "/v1", Version: "v1"}
		return metav1.APIGroup{Name: name, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
	}
	writeJSON(w, http.StatusOK, &metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{group("coordination.k8s.io"), group("events.k8s.io")},
	})
}

// resourceList serves the discovery of the resources of groupVersion.
func (s *fakeAPIServer) resourceList(groupVersion string, resources ...metav1.APIResource) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: groupVersion,
			APIResources: resources,
		})
	}
}

// notServed answers 404 for a path the server does not serve, and
// remembers the request.
func (s *fakeAPIServer) notServed(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.unserved = append(s.unserved, r.Method+" "+r.URL.String())
	s.mu.Unlock()
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource", nil)
}

// Unserved returns the requests, method and URL, for paths the server does
// not serve.
func (s *fakeAPIServer) Unserved() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unserved)
}

// acceptEvent accepts any write of an event and echoes it.
func acceptEvent(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	status := http.StatusOK
	if r.Method == http.MethodPost {
		status = http.StatusCreated
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// SeedConfigMap stores a ConfigMap with data, as if created by someone
// else.
func (s *fakeAPIServer) SeedConfigMap(namespace, name string, data map[string]string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storeLocked("configmaps", cm, watch.Added)
}

// ConfigMap returns a copy of the ConfigMap stored under namespace and
// name, nil if there is none.
func (s *fakeAPIServer) ConfigMap(namespace, name string) *corev1.ConfigMap {
	obj := s.object(objectKey{"configmaps", namespace, name})
	if obj == nil {
		return nil
	}
	return obj.(*corev1.ConfigMap)
}

// Lease returns a copy of the lease stored under namespace and name, nil
// if there is none.
func (s *fakeAPIServer) Lease(namespace, name string) *coordinationv1.Lease {
	obj := s.object(objectKey{"leases", namespace, name})
	if obj == nil {
		return nil
	}
	return obj.(*coordinationv1.Lease)
}

// object returns a copy of the object stored under key, nil if there is
// none.
func (s *fakeAPIServer) object(key objectKey) client.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.objects[key]
	if !ok {
		return nil
	}
	return obj.DeepCopyObject().(client.Object)
}

// storeLocked gives obj the next resourceVersion and its kind, stores a
// copy, and tells the ConfigMap watches of the change. s.mu must be held.
func (s *fakeAPIServer) storeLocked(resource string, obj client.Object, typ watch.EventType) {
	s.rv++
	obj.SetResourceVersion(strconv.Itoa(s.rv))
	if created := obj.GetCreationTimestamp(); created.IsZero() {
		obj.SetCreationTimestamp(metav1.Now())
	}
	obj.GetObjectKind().SetGroupVersionKind(kinds[resource])
	s.objects[objectKey{resource, obj.GetNamespace(), obj.GetName()}] = obj.DeepCopyObject().(client.Object)
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		s.notifyLocked(configMapEvent{typ: typ, rv: s.rv, obj: cm.DeepCopy()})
	}
}

// notifyLocked records ev and sends it to the watches of its namespace.
// A watch that has fallen behind is closed; its client opens a new one.
// s.mu must be held.
func (s *fakeAPIServer) notifyLocked(ev configMapEvent) {
	s.history = append(s.history, ev)
	for wt := range s.watchers {
		if wt.namespace != ev.obj.Namespace {
			continue
		}
		select {
		case wt.events <- ev:
		default:
			delete(s.watchers, wt)
			close(wt.events)
		}
	}
}

// get serves a GET of one object of resource.
func (s *fakeAPIServer) get(resource string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		obj := s.object(keyOf(resource, r))
		if obj == nil {
			writeNotFound(w, resource, r.PathValue("name"))
			return
		}
		writeJSON(w, http.StatusOK, obj)
	}
}

// create serves a POST of a new object of resource.
func (s *fakeAPIServer) create(resource string, newObject func() client.Object) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		obj := newObject()
		if !decodeBody(w, r, obj) {
			return
		}
		obj.SetNamespace(r.PathValue("ns"))
		key := objectKey{resource, obj.GetNamespace(), obj.GetName()}
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, exists := s.objects[key]; exists {
			writeStatus(w, http.StatusConflict, metav1.StatusReasonAlreadyExists,
				fmt.Sprintf("%s %q already exists", resource, key.name), details(resource, key.name))
			return
		}
		s.storeLocked(resource, obj, watch.Added)
		writeJSON(w, http.StatusCreated, obj)
	}
}

// update serves a PUT of an object of resource, refusing it when its
// resourceVersion is set and not the stored one.
func (s *fakeAPIServer) update(resource string, newObject func() client.Object) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		obj := newObject()
		if !decodeBody(w, r, obj) {
			return
		}
		key := keyOf(resource, r)
		obj.SetNamespace(key.namespace)
		obj.SetName(key.name)
		s.mu.Lock()
		defer s.mu.Unlock()
		old, exists := s.objects[key]
		if !exists {
			writeNotFound(w, resource, key.name)
			return
		}
		if rv := obj.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
			writeStatus(w, http.StatusConflict, metav1.StatusReasonConflict,
				fmt.Sprintf("the object has been modified; resourceVersion %s is not %s", rv, old.GetResourceVersion()),
				details(resource, key.name))
			return
		}
		obj.SetCreationTimestamp(old.GetCreationTimestamp())
		s.storeLocked(resource, obj, watch.Modified)
		writeJSON(w, http.StatusOK, obj)
	}
}

// mergePatchConfigMap serves a PATCH of a ConfigMap with a JSON merge
// patch (RFC 7386), the kind client.MergeFrom makes.
func (s *fakeAPIServer) mergePatchConfigMap(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != string(types.MergePatchType) {
		writeStatus(w, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("patch type %q is not served; use %s", ct, types.MergePatchType), nil)
		return
	}
	patch, err := io.ReadAll(r.Body)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error(), nil)
		return
	}
	key := keyOf("configmaps", r)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.objects[key]
	if !exists {
		writeNotFound(w, "configmaps", key.name)
		return
	}
	cm, err := mergePatch(old.(*corev1.ConfigMap), patch)
	if err != nil {
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error(), details("configmaps", key.name))
		return
	}
	cm.Namespace, cm.Name = key.namespace, key.name
	s.storeLocked("configmaps", cm, watch.Modified)
	writeJSON(w, http.StatusOK, cm)
}

// mergePatch returns cm with the JSON merge patch applied.
func mergePatch(cm *corev1.ConfigMap, patch []byte) (*corev1.ConfigMap, error) {
	doc, err := json.Marshal(cm)
	if err != nil {
		return nil, err
	}
	patched, err := jsonpatch.MergePatch(doc, patch)
	if err != nil {
		return nil, err
	}
	var out corev1.ConfigMap
	if err := json.Unmarshal(patched, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// listOrWatchConfigMaps serves a list of the ConfigMaps of a namespace,
// or a watch of them when ?watch=true.
func (s *fakeAPIServer) listOrWatchConfigMaps(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	if r.URL.Query().Get("watch") == "true" {
		s.watchConfigMaps(w, r, ns)
		return
	}
	s.mu.Lock()
	list := &corev1.ConfigMapList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)},
	}
	for _, cm := range s.configMapsLocked(ns) {
		list.Items = append(list.Items, *cm)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, list)
}

// configMapsLocked returns copies of the ConfigMaps of ns, ordered by
// name. s.mu must be held.
func (s *fakeAPIServer) configMapsLocked(ns string) []*corev1.ConfigMap {
	var out []*corev1.ConfigMap
	for key, obj := range s.objects {
		if key.resource == "configmaps" && key.namespace == ns {
			out = append(out, obj.DeepCopyObject().(*corev1.ConfigMap))
		}
	}
	slices.SortFunc(out, func(a, b *corev1.ConfigMap) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// watchConfigMaps streams the changes to the ConfigMaps of ns, as JSON
// watch events, until the client goes away, the server closes, or
// timeoutSeconds pass. It starts as an API server does:
//   - with sendInitialEvents=true (client-go's watch-list), an ADDED event
//     for every ConfigMap, then a BOOKMARK marking the end of them;
//   - from resourceVersion "" or "0", an ADDED event for every ConfigMap;
//   - from any other resourceVersion, the changes made after it.
//
// With refuseWatchList, it answers a watch-list 422 Invalid, as API
// servers before 1.27 do, and the client falls back to a list.
func (s *fakeAPIServer) watchConfigMaps(w http.ResponseWriter, r *http.Request, ns string) {
	q := r.URL.Query()
	sendInitial := q.Get("sendInitialEvents") == "true"
	from, _ := strconv.Atoi(q.Get("resourceVersion"))
	if q.Get("resourceVersionMatch") != "" && s.refuseWatchList {
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			"resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch", details("configmaps", ""))
		return
	}

	wt := &watcher{namespace: ns, events: make(chan configMapEvent, 64)}
	s.mu.Lock()
	var first []configMapEvent
	if sendInitial || from == 0 {
		for _, cm := range s.configMapsLocked(ns) {
			first = append(first, configMapEvent{typ: watch.Added, obj: cm})
		}
	} else {
		for _, ev := range s.history {
			if ev.rv > from && ev.obj.Namespace == ns {
				first = append(first, ev)
			}
		}
	}
	if sendInitial {
		first = append(first, initialEventsEnd(s.rv))
	}
	s.watchers[wt] = struct{}{}
	s.mu.Unlock()
	defer s.unwatch(wt)

	var timeout <-chan time.Time
	if secs, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && secs > 0 {
		timer := time.NewTimer(time.Duration(secs) * time.Second)
		defer timer.Stop()
		timeout = timer.C
	}

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for _, ev := range first {
		writeEvent(enc, ev)
	}
	http.NewResponseController(w).Flush()
	for {
		select {
		case ev, ok := <-wt.events:
			if !ok {
				return
			}
			writeEvent(enc, ev)
			http.NewResponseController(w).Flush()
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-timeout:
			return
		}
	}
}

// initialEventsEnd is the BOOKMARK that ends the initial events of a
// watch-list at resourceVersion rv.
func initialEventsEnd(rv int) configMapEvent {
	return configMapEvent{typ: watch.Bookmark, obj: &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: strconv.Itoa(rv),
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		},
	}}
}

// unwatch forgets the watcher wt.
func (s *fakeAPIServer) unwatch(wt *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers, wt)
}

// writeEvent writes ev as one JSON watch event.
func writeEvent(enc *json.Encoder, ev configMapEvent) {
	obj := ev.obj.DeepCopy()
	obj.SetGroupVersionKind(kinds["configmaps"])
	raw, _ := json.Marshal(obj)
	_ = enc.Encode(&metav1.WatchEvent{Type: string(ev.typ), Object: runtime.RawExtension{Raw: raw}})
}

// keyOf returns the key of the object of resource that r names.
func keyOf(resource string, r *http.Request) objectKey {
	return objectKey{resource, r.PathValue("ns"), r.PathValue("name")}
}

// decodeBody decodes r's body, JSON or protobuf as client-go sends them,
// into obj, answering 400 and returning false when it cannot.
func decodeBody(w http.ResponseWriter, r *http.Request, obj client.Object) bool {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		_, _, err = codecs.UniversalDeserializer().Decode(body, nil, obj)
	}
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "decoding the body: "+err.Error(), nil)
		return false
	}
	return true
}

// details returns the details of a Status about the object name of
// resource.
func details(resource, name string) *metav1.StatusDetails {
	return &metav1.StatusDetails{Name: name, Group: kinds[resource].Group, Kind: resource}
}

// writeNotFound answers 404 for the object name of resource.
func writeNotFound(w http.ResponseWriter, resource, name string) {
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
		fmt.Sprintf("%s %q not found", resource, name), details(resource, name))
}

// writeStatus answers code with a failure Status.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string, d *metav1.StatusDetails) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg, Details: d,
	})
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
