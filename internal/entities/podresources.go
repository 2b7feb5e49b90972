package entities

import (
	"encoding/json"

	"github.com/cedar-policy/cedar-go/types"
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// effectiveResources is a Pod's effectiveResources reading: {requests,
// limits}, maps of quantity readings, as k8s.io/component-helpers/resource
// computes them. A limit is kept only where it is bounded (see
// boundedLimits). An object that does not decode as a Pod gets an invalid
// value, so a policy reading it fails closed.
func (c *ObjectConverter) effectiveResources(obj map[string]any, path string) types.Value {
	quantities, ok := c.Schema.Maps[schemagen.QuantityMapType]
	if !ok {
		return nil
	}
	reduced := resourceFields(obj)
	if hasHostileQuantity(reduced) {
		c.warn(path, "a quantity with an exponent beyond ±%d", maxQuantityExponent)
		return invalidValue(nil, obj)
	}
	var pod corev1.Pod
	raw, err := json.Marshal(reduced)
	if err == nil {
		err = json.Unmarshal(raw, &pod)
	}
	if err != nil {
		c.warn(path, "not a Pod: %v", err)
		return invalidValue(nil, obj)
	}
	opts := resourcehelper.PodResourcesOptions{}
	return types.NewRecord(types.RecordMap{
		schemagen.AttrRequests: c.quantityMap(quantities, resourcehelper.PodRequests(&pod, opts), path+".requests"),
		schemagen.AttrLimits:   c.quantityMap(quantities, boundedLimits(&pod, resourcehelper.PodLimits(&pod, opts)), path+".limits"),
	})
}

// boundedLimits keeps the limits that bound the pod: set at pod level, or
// set by every container and init container. PodLimits sums the limits that
// are set, so a container without one would otherwise hide that the pod
// is unbounded.
func boundedLimits(pod *corev1.Pod, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range limits {
		if podLevel := pod.Spec.Resources; podLevel != nil {
			if _, ok := podLevel.Limits[name]; ok {
				out[name] = q
				continue
			}
		}
		if everyContainerLimits(pod, name) {
			out[name] = q
		}
	}
	return out
}

func everyContainerLimits(pod *corev1.Pod, name corev1.ResourceName) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, ctr := range list {
			if _, ok := ctr.Resources.Limits[name]; !ok {
				return false
			}
		}
	}
	return true
}

// quantityMap converts a resource list into a map entity of quantity
// readings.
func (c *ObjectConverter) quantityMap(t *schemagen.MapType, list corev1.ResourceList, path string) types.EntityUID {
	obj := make(map[string]any, len(list))
	for name, q := range list {
		obj[string(name)] = q.String()
	}
	return c.mapEntity(t, obj, path)
}

// resourceFields is the part of a Pod that its effective resources read:
// each container's and init container's name, restart policy (sidecars) and
// resources, the pod-level resources and the overhead. Only these are
// decoded, so no other field's value is parsed as a quantity.
func resourceFields(obj map[string]any) map[string]any {
	spec, _ := obj["spec"].(map[string]any)
	out := map[string]any{}
	for _, key := range []string{"resources", "overhead"} {
		if v, ok := spec[key]; ok {
			out[key] = v
		}
	}
	for _, key := range []string{"containers", "initContainers"} {
		list, _ := spec[key].([]any)
		var kept []any
		for _, item := range list {
			ctr, _ := item.(map[string]any)
			k := map[string]any{}
			for _, f := range []string{"name", "restartPolicy", "resources"} {
				if v, ok := ctr[f]; ok {
					k[f] = v
				}
			}
			kept = append(kept, k)
		}
		if kept != nil {
			out[key] = kept
		}
	}
	return map[string]any{"spec": out}
}

// hasHostileQuantity reports whether v holds a string that decoding as a
// resource.Quantity might never return from (an exponent beyond
// ±maxQuantityExponent): such an object is not decoded as a Pod.
func hasHostileQuantity(v any) bool {
	switch x := v.(type) {
	case string:
		_, exp, ok := splitExponent(x)
		return ok && (exp > maxQuantityExponent || exp < -maxQuantityExponent)
	case map[string]any:
		for _, e := range x {
			if hasHostileQuantity(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasHostileQuantity(e) {
				return true
			}
		}
	}
	return false
}
