-- mx.gluoncv.utils — GluonCV's utils: metrics (VOCMApMetric, VOC07MApMetric,
-- SegmentationMetric, COCODetectionMetric), cocoeval (pycocotools' COCOeval) and viz (mx.viz's
-- plot_image / plot_bbox / plot_mask).
return require("mx.core.lazy")({}, { metrics = "mx.gluoncv.utils.metrics", viz = "mx.viz",
  cocoeval = "mx.gluoncv.utils.cocoeval" })
